# syntax=docker/dockerfile:1
# provgate as a container: a static binary on a distroless base, running as
# a non-root user, with its state in the /data volume. The root file system
# may be read-only: the server writes nothing outside its data dir.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t provgate .
#   docker run --read-only -v provgate-data:/data -p 8092:8092 provgate

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/provgate ./cmd/provgate \
	&& mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/provgate /usr/local/bin/provgate
COPY LICENSE /usr/share/doc/provgate/LICENSE
# A new volume takes the ownership and mode of the image's directory.
COPY --from=build --chown=65532:65532 --chmod=0700 /out/data /data
USER 65532:65532
ENV PROVGATE_DATA_DIR=/data \
	PROVGATE_LISTEN=:8092
VOLUME ["/data"]
EXPOSE 8092
ENTRYPOINT ["/usr/local/bin/provgate"]
CMD ["serve"]
