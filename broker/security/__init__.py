"""Security: the authorizer (Kafka's AclAuthorizer) and where its ACLs are stored."""
