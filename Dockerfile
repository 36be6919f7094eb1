# deid: multi-stage build. The build stage runs the same cargo command as CI (.ci/run builds and
# tests with `cargo test --release`); the runtime stage is a slim Debian with only the binary,
# running as an unprivileged user.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin deid

FROM debian:bookworm-slim AS runtime
RUN useradd --system --uid 10001 --home-dir /var/lib/deid --create-home deid
COPY --from=build /src/target/release/deid /usr/local/bin/deid
USER 10001:10001
WORKDIR /var/lib/deid
ENV DEID_BIND=0.0.0.0:8080 \
    DEID_DATA_DIR=/var/lib/deid/data \
    DEID_LOG_FORMAT=json
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=5 CMD ["/usr/local/bin/deid", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/deid"]
CMD ["serve"]
