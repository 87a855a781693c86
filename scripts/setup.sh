#!/usr/bin/env bash
# Installs everything train needs on Debian 12 (as root or with sudo), builds
# ./train and runs a real 2-rank training job under mpirun.
#
#   scripts/setup.sh            install, build, train one epoch on 2 ranks
#   scripts/setup.sh --no-run   install and build only
#   scripts/setup.sh --test     also what the tests need (PyTorch for the CPU, to
#                               check checkpoints load into torch.nn; Prometheus and
#                               its Pushgateway, a single-node Slurm with munge,
#                               all started by the tests); no run
#
# Idempotent: apt runs only for packages that are missing; Go is fetched only
# when `go` is absent or older than go.mod asks for.
set -euo pipefail
cd "$(dirname "$0")/.."

run_job=1
test_deps=0
case "${1:-}" in
--no-run) run_job=0 ;;
--test) run_job=0 test_deps=1 ;;
"") ;;
*) echo "usage: scripts/setup.sh [--no-run | --test]" >&2; exit 2 ;;
esac

as_root() {
	if [[ $EUID -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

# Debian packages: OpenMPI, the C toolchain cgo needs, OpenBLAS,
# libjpeg-turbo and libwebp (Pillow's JPEG and WebP decoders, opened at run
# time), the Fashion-MNIST dataset (/usr/share/datasets/fashion-mnist), and
# text for language models (bible-kjv: `bible -f Gen1:1-Rev22:21` prints the King
# James text; fortunes: /usr/share/games/fortunes/*.u8).
packages=(openmpi-bin libopenmpi-dev libopenblas-dev libturbojpeg0 libwebp7 pkg-config gcc libc6-dev
	dataset-fashion-mnist bible-kjv fortunes ca-certificates curl unzip git)
((test_deps)) && packages+=(g++ python3-torch python3-torchvision python3-pil python3-numpy prometheus prometheus-pushgateway slurm-wlm munge iproute2)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "setup: installing ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Go: the version go.mod names, from the Go module proxy's toolchain zips
# (what GOTOOLCHAIN downloads) when the installed one is older or absent.
want=$(awk '/^go /{print $2}' go.mod)
export PATH="/usr/local/go/bin:$PATH"
have=$(go env GOVERSION 2>/dev/null | sed 's/^go//' || true)
if [[ -z "$have" ]] || [[ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]]; then
	ver=1.26.8
	arch=$(dpkg --print-architecture)
	echo "setup: installing Go $ver (found: ${have:-none}) into /usr/local/go"
	tmp=$(mktemp -d)
	curl -fsSL -o "$tmp/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$ver.linux-$arch.zip"
	unzip -q "$tmp/go.zip" -d "$tmp"
	as_root rm -rf /usr/local/go
	as_root mv "$tmp/golang.org/toolchain@v0.0.1-go$ver.linux-$arch" /usr/local/go
	rm -rf "$tmp"
	go version
fi

echo "setup: building ./train"
go build -o train .

if ((run_job)); then
	mpi=(mpirun -np 2 --oversubscribe)
	[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)
	echo "setup: ${mpi[*]} ./train --epochs 1"
	"${mpi[@]}" ./train --epochs 1 --log-every 200
	echo "setup: done. Train for real with: ${mpi[*]} ./train --epochs 5"
fi
