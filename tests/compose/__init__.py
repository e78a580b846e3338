"""docker-compose.yml run by a real Docker engine: see docker.py."""
