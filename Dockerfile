# syntax=docker/dockerfile:1
# The agents, the gateway and the CLI in one image (docs/deploy.md). Build from the root of a
# checkout: docker build -t a2a-handoff .

# The package and every dependency as wheels, the PostgreSQL and Redis stores' extras too.
FROM python:3.11-slim AS wheels
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY a2a_handoff/ a2a_handoff/
COPY servers/ servers/
COPY orchestrator/ orchestrator/
RUN pip wheel --wheel-dir /wheels ".[postgres,redis]"

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Installed from those wheels only (no index: nothing else can stand in for the package).
RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels "a2a-handoff[postgres,redis]"
# A user of its own. /var/lib/a2a holds a SQLite store (a volume there keeps it); /run/a2a
# the secrets the entrypoint copies for it (see deploy/entrypoint.sh).
RUN groupadd --system --gid 10001 a2a \
    && useradd --system --uid 10001 --gid a2a --home-dir /var/lib/a2a --shell /usr/sbin/nologin a2a \
    && install -d -o a2a -g a2a -m 0700 /var/lib/a2a /run/a2a
COPY --chmod=0755 deploy/entrypoint.sh /usr/local/bin/a2a-entrypoint
USER 10001:10001
WORKDIR /var/lib/a2a
EXPOSE 8000
# Alive while the process serves; slim images have no curl: python's urllib asks.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/livez', timeout=2)"]
ENTRYPOINT ["a2a-entrypoint"]
# One example agent on its own (SQLite in /var/lib/a2a); compose.yaml and the Kubernetes
# manifests give each container its own command.
CMD ["python", "-m", "servers", "triage", "--host", "0.0.0.0", "--port", "8000", \
     "--url", "http://127.0.0.1:8000/", "--store", "sqlite:////var/lib/a2a/triage.db"]
