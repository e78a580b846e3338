# The Odradek broker image. `docker build -t odradek .` on the public Python image; the tests
# build on a base image made locally (scripts/docker-base-image: no registry is reachable there)
# with `--build-arg BASE=<name>`. Configure it with KAFKA_<KEY> environment variables, as
# Kafka's images (KAFKA_BROKER_ID, KAFKA_ZOOKEEPER_CONNECT, KAFKA_LISTENERS, ...), or mount a
# server.properties and pass `--config /path` as the command: see docs/operations.md.
ARG BASE=python:3.11-slim
FROM ${BASE}
LABEL org.odradek.image=broker

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/odradek/bin:$PATH

# The runtime dependencies first, from pyproject.toml alone, so a code change rebuilds one layer.
COPY pyproject.toml /src/
RUN python3 -m venv /opt/odradek \
 && python3 -c "import tomllib; print('\n'.join(tomllib.load(open('/src/pyproject.toml', 'rb'))['project']['dependencies']))" > /src/requirements.txt \
 && pip install --no-cache-dir -r /src/requirements.txt

COPY . /src
RUN pip install --no-cache-dir --no-deps /src \
 && rm -rf /src \
 && useradd --system --uid 1000 --user-group --home-dir /var/lib/odradek --shell /usr/sbin/nologin odradek \
 && mkdir -p /var/lib/odradek/data \
 && chown -R odradek:odradek /var/lib/odradek

USER odradek
WORKDIR /var/lib/odradek
VOLUME /var/lib/odradek
# One PLAINTEXT listener on 9092 for `docker run -p 9092:9092 odradek`; compose files set their
# own listeners (docker-compose.yml: INTERNAL for the compose network, EXTERNAL for the host).
ENV KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    KAFKA_LOG_DIRS=/var/lib/odradek/data
EXPOSE 9092
# Healthy once the broker answers Metadata listing itself with a known controller (broker/healthcheck.py).
HEALTHCHECK --interval=3s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-m", "broker.healthcheck"]
# SIGTERM (docker stop) is a controlled shutdown: the controller moves this broker's leaderships
# away before it exits 0. Run with an init (`init: true`) so PID 1 reaps and forwards signals.
STOPSIGNAL SIGTERM
ENTRYPOINT ["odradek", "serve", "--config-env"]
