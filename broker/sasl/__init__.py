"""SASL authentication on SASL_PLAINTEXT and SASL_SSL listeners (Kafka's SaslServerAuthenticator):
the JAAS configuration (jaas), the per-listener settings (listeners), the mechanisms' servers
(plain) and the per-connection state machine (authenticator)."""
