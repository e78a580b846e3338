"""Kafka's SaslAuthenticationException: its message goes to the client as is."""


class SaslAuthenticationError(Exception):
    """Authentication failed; str(self) is the message the SaslAuthenticate response carries."""


class SaslError(Exception):
    """A mechanism failure whose details stay on the broker (Kafka's SaslException): the client is
    told 'Authentication failed during authentication due to invalid credentials with SASL
    mechanism <mechanism>'."""
