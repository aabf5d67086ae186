#!/usr/bin/env bash
# Install Perch as a hardened system service (run as root from a checkout):
#   sudo systemd/install.sh              # or: sudo make install-service
#   sudo systemd/install.sh --exec       # also allow the exec sandbox (systemd/exec-sandbox.conf)
#   sudo systemd/install.sh --mcp-node   # also let Node.js MCP servers run (systemd/mcp-node.conf)
# Copies the checkout to /opt/perch and installs it into /opt/perch/.venv (kept across runs),
# creates the `perch` user and its state directory /var/lib/perch, writes
# /etc/perch/config.yaml with bot.operator.service_config (a structural YAML edit: state under
# /var/lib/perch, console off, JSON logs, secrets read with ${cred:NAME}), one root-only file
# per secret in /etc/perch/credentials (systemd hands them to the service with
# LoadCredential=), and /etc/perch/env for non-secret settings, then enables the unit.
# Re-running it upgrades the code and keeps your config, credentials, env file and data.
# PYTHON picks the interpreter (default /usr/bin/python3); pip's own PIP_* variables apply.
set -euo pipefail
with_exec=no
with_node=no
for arg in "$@"; do
  case "$arg" in
    --exec) with_exec=yes ;;
    --mcp-node) with_node=yes ;;
    *) echo "usage: install.sh [--exec] [--mcp-node]" >&2; exit 2 ;;
  esac
done
src="$(cd "$(dirname "$0")/.." && pwd)"
prefix=/opt/perch
state=/var/lib/perch
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root (sudo)" >&2; exit 1; }

id perch >/dev/null 2>&1 || useradd --system --home-dir "$state" --shell /usr/sbin/nologin perch
mkdir -p "$prefix" /etc/perch
if [ "$src" != "$prefix" ]; then
  tar -C "$src" --exclude=.venv --exclude=.git --exclude=data --exclude=workspace \
      --exclude=.mypy_cache --exclude=.ruff_cache --exclude=.pytest_cache --exclude=.hypothesis \
      --exclude=config.local.yaml --exclude='config*.yaml.bak.*' --exclude=perch.env \
      --exclude=credentials -cf - . | tar -C "$prefix" -xf -
fi
# The system Python (not one under /root or $HOME: ProtectHome hides those from the service).
python="${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "install.sh: Perch needs Python 3.11 or newer ($python is older)" >&2; exit 1; }
venv="$prefix/.venv"
if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet "$prefix"                       # and its dependencies
"$venv/bin/python" -m pip install --quiet --no-deps --force-reinstall "$prefix"  # this code

# The config, edited as YAML (comments kept). Credentials: the names the unit loads.
credentials="$(sed -n 's/^LoadCredential=\([^:]*\):.*/\1/p' "$src/systemd/perch.service" | paste -sd, -)"
"$venv/bin/python" -m bot.operator.service_config /etc/perch/config.yaml \
  --state-dir "$state" --credentials "$credentials"
if [ ! -f /etc/perch/env ]; then
  printf '# Non-secret settings only; secrets go in /etc/perch/credentials/.\n# SIGNAL_NUMBER=\n' > /etc/perch/env
fi
# Secrets: root-only files; systemd copies them into the service's credentials directory.
install -d -m 0700 -o root -g root /etc/perch/credentials
for name in ${credentials//,/ }; do
  [ -f "/etc/perch/credentials/$name" ] || install -m 0600 -o root -g root /dev/null "/etc/perch/credentials/$name"
done
echo "Put your API key in /etc/perch/credentials/anthropic_api_key (and channel tokens next to it)."
chown root:perch /etc/perch /etc/perch/config.yaml /etc/perch/env
chmod 0750 /etc/perch
chmod 0640 /etc/perch/config.yaml /etc/perch/env
# The state directory (systemd's StateDirectory= makes it too; this serves other supervisors).
install -d -m 0750 -o perch -g perch "$state"

install -m 0644 "$src/systemd/perch.service" /etc/systemd/system/perch.service
dropins=/etc/systemd/system/perch.service.d
if [ "$with_exec" = yes ]; then
  command -v bwrap >/dev/null || apt-get install -y -qq bubblewrap
  install -D -m 0644 "$src/systemd/exec-sandbox.conf" "$dropins/exec-sandbox.conf"
fi
if [ "$with_node" = yes ]; then
  install -D -m 0644 "$src/systemd/mcp-node.conf" "$dropins/mcp-node.conf"
fi
if [ ! -d /run/systemd/system ]; then
  echo "Installed, but systemd is not running here. Start Perch as its user from $state,"
  echo "with the settings of /etc/perch/env and the credentials readable by perch:"
  echo "  cd $state && runuser -u perch -- env \$(grep -v '^#' /etc/perch/env | xargs) \\"
  echo "    CREDENTIALS_DIRECTORY=<a copy of /etc/perch/credentials owned by perch> \\"
  echo "    $venv/bin/perch run --config /etc/perch/config.yaml"
  exit 0
fi
systemctl daemon-reload
systemctl enable perch.service
echo "Installed. Start it with: systemctl start perch   (logs: journalctl -u perch -f)"
echo "Check it (as the service, with its credentials):"
echo "  sudo systemd-run --pipe --wait --quiet -p User=perch -p WorkingDirectory=$state \\"
echo "    -p EnvironmentFile=-/etc/perch/env -p Environment=PERCH_BOOTSTRAP=$prefix/bootstrap \\"
echo "    \$(sed -n 's/^LoadCredential=/-p LoadCredential=/p' /etc/systemd/system/perch.service) \\"
echo "    $venv/bin/perch doctor --config /etc/perch/config.yaml"
