# The wasmop host image, for machines with a container daemon:
#   docker build -t wasmop:0.1.0 .
# `cargo xtask image` builds the same image (an OCI archive) without one.
# The binary is static (musl); the base is empty; the guests come along
# under /modules, where deploy/host/guests.yaml lists them.
FROM rust:1.95 AS build
RUN rustup target add x86_64-unknown-linux-musl wasm32-unknown-unknown wasm32-wasip2
WORKDIR /src
COPY . .
ENV CC_x86_64_unknown_linux_musl=gcc
RUN cargo xtask build-guests \
 && cargo build --release --target x86_64-unknown-linux-musl -p wasmop-host --bin wasmop

FROM scratch
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/wasmop /wasmop
COPY --from=build /src/target/guests/cache-operator.wasm /src/target/guests/cache-operator-v2.wasm /modules/
USER 65532:65532
ENTRYPOINT ["/wasmop"]
CMD ["run"]
