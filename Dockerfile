# deid: multi-stage build. The build stage runs the same cargo command as CI (.ci/run builds and
# tests with `cargo test --release`); the runtime stage is a slim Debian with only the stripped
# binary, running as an unprivileged user.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Dependencies first, in a layer of their own: the manifests with stub sources, so that a change
# of deid's sources does not rebuild them.
COPY Cargo.toml Cargo.lock ./
COPY crates/deid-engine/Cargo.toml crates/deid-engine/
RUN mkdir -p src crates/deid-engine/src crates/deid-engine/benches crates/deid-engine/tests/engine tests/service \
 && echo 'fn main() {}' > src/main.rs && touch src/lib.rs crates/deid-engine/src/lib.rs \
 && for f in crates/deid-engine/benches/check.rs crates/deid-engine/benches/search.rs \
        crates/deid-engine/tests/engine/main.rs tests/service/main.rs; do echo 'fn main() {}' > "$f"; done \
 && cargo build --release --locked --bin deid \
 && rm -rf src crates/deid-engine/src target/release/deps/deid-* target/release/deps/libdeid* \
        target/release/.fingerprint/deid-*
COPY . .
# The release profile keeps line tables for profiling; the image ships the binary stripped.
RUN cargo build --release --locked --bin deid \
 && strip target/release/deid

FROM debian:bookworm-slim AS runtime
RUN useradd --system --uid 10001 --home-dir /var/lib/deid --create-home deid \
 && mkdir -p /var/lib/deid/data && chown 10001:10001 /var/lib/deid/data
COPY --from=build /src/target/release/deid /usr/local/bin/deid
USER 10001:10001
WORKDIR /var/lib/deid
ENV DEID_BIND=0.0.0.0:8080 \
    DEID_DATA_DIR=/var/lib/deid/data \
    DEID_LOG_FORMAT=json
# The embedded SQLite database (when no DATABASE_URL is given) lives here.
VOLUME ["/var/lib/deid/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=5 CMD ["/usr/local/bin/deid", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/deid"]
CMD ["serve"]
