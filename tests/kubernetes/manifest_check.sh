#!/usr/bin/env bash
# The `kubernetes_manifests` test: every manifest of deploy/kubernetes/ checked by
# manifest_check.py. Needs only python3-yaml; without it the skip token (or a failure where the
# kubernetes tier is required: tests/support/requirements.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=tests/support/requirements.sh
source "$here/tests/support/requirements.sh"
if ! python3 -c 'import yaml' 2>/dev/null; then
  skip_or_fail kubernetes "python3-yaml is missing (scripts/setup.sh installs it)"
fi
exec python3 "$here/tests/kubernetes/manifest_check.py" "$here/deploy/kubernetes"
