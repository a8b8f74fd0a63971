# The archmax worker image: `archmax worker` against TEMPORAL_ADDRESS (see docker-compose.yml).
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
# there is one and does not fail when there is not.
COPY pyproject.toml README.m[d] ./
COPY archmax_temporal/ ./archmax_temporal/
COPY worker.py ./
COPY workflows/ ./workflows/
COPY activities/ ./activities/
COPY client/ ./client/
COPY examples/support-inbox/workflows/ ./examples/support-inbox/workflows/
RUN pip install . \
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
    ARCHMAX_STORE=/data/sessions
VOLUME ["/data/sessions"]

# The worker shuts down cleanly on SIGTERM, handing its sticky sessions over at once.
STOPSIGNAL SIGTERM
CMD ["archmax", "worker"]
