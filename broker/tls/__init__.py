"""TLS: SSL listeners, the broker's own TLS connections, principals (issue #23 §1)."""
