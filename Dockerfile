# gpudrv's image: `gpudrv reconcile` in the cluster (deploy/), or any gpudrv command.
#   docker build -t <registry>/gpudrv:<version> .
# Slim Python, git and ssh for the fleet repository, a non-root user (65532), nothing else. The
# deployment runs it with a read-only root filesystem: the clone goes to /var/lib/gpudrv (an emptyDir).
# Pin the base images by digest in your registry's copy (e.g. python:3.11-slim@sha256:...).

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY reconciler ./reconciler
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    # ssh needs a passwd entry for the user it runs as.
    && groupadd --gid 65532 gpudrv \
    && useradd --uid 65532 --gid 65532 --home-dir /var/lib/gpudrv --no-create-home \
        --shell /usr/sbin/nologin gpudrv \
    && install -d -o 65532 -g 65532 /var/lib/gpudrv
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    GPUDRV_WORKDIR=/var/lib/gpudrv
USER 65532:65532
WORKDIR /var/lib/gpudrv
EXPOSE 8080
ENTRYPOINT ["gpudrv"]
CMD ["reconcile", "--help"]
