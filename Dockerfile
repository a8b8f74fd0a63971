# The archmax image: `archmax worker` (the default) or `archmax serve` against the configured
# Temporal (TEMPORAL_* or a temporal.toml profile; see docker-compose.yml and the README).
#
#   docker build -t archmax-temporal .
#   docker run --rm -e TEMPORAL_ADDRESS=host.docker.internal:7233 -e ARCHMAX_API_KEY \
#       -e ARCHMAX_MODEL -v "$PWD/examples/support-inbox:/app/authoring:ro" archmax-temporal
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Only what the distribution packages: the archmax_temporal package (its links to workflows/,
# activities/, client/, worker.py and the demo example). README.m[d] copies the readme when
# there is one and does not fail when there is not. constraints.txt pins every dependency,
# transitive ones included, so two builds of one commit install the same versions.
COPY pyproject.toml constraints.txt README.m[d] ./
COPY archmax_temporal/ ./archmax_temporal/
COPY worker.py ./
COPY workflows/ ./workflows/
COPY activities/ ./activities/
COPY client/ ./client/
COPY examples/support-inbox/workflows/ ./examples/support-inbox/workflows/
RUN pip install --constraint constraints.txt ".[stream]" \
    && rm -rf /src

RUN useradd --system --uid 10001 --user-group --create-home archmax \
    && mkdir -p /app/authoring /data/sessions \
    && chown -R archmax:archmax /data
USER archmax
WORKDIR /app

# Defaults for a container; docker-compose.yml sets them explicitly too.
ENV TEMPORAL_ADDRESS=temporal:7233 \
    TEMPORAL_NAMESPACE=default \
    ARCHMAX_TASK_QUEUE=archmax \
    ARCHMAX_ROOT=/app/authoring \
    ARCHMAX_STORE=/data/sessions \
    ARCHMAX_LOG_FORMAT=json \
    ARCHMAX_HEALTH_ADDRESS=0.0.0.0:8081
VOLUME ["/data/sessions"]
EXPOSE 8081 9464

# Ready: the worker runs, is not draining, and Temporal answers.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8081/readyz', timeout=4)"]

# The worker drains on SIGTERM (ARCHMAX_SHUTDOWN_GRACE, 15 s), handing its sessions over.
STOPSIGNAL SIGTERM
CMD ["archmax", "worker"]
