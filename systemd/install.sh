#!/usr/bin/env bash
# Install Perch as a hardened system service (run as root from a checkout):
#   sudo systemd/install.sh            # or: sudo make install-service
# Copies the checkout to /opt/perch, builds its virtualenv, creates the `perch` user, writes
# /etc/perch/config.yaml (state under /var/lib/perch, console off, JSON logs) and
# /etc/perch/env (put ANTHROPIC_API_KEY and channel tokens there), then enables the unit.
# Re-running it upgrades the code and keeps your config, env file and data.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
prefix=/opt/perch
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root (sudo)" >&2; exit 1; }

id perch >/dev/null 2>&1 || useradd --system --home-dir /var/lib/perch --shell /usr/sbin/nologin perch
mkdir -p "$prefix" /etc/perch
if [ "$src" != "$prefix" ]; then
  tar -C "$src" --exclude=.venv --exclude=.git --exclude=data --exclude=workspace -cf - . | tar -C "$prefix" -xf -
fi
# The system Python (not one under /root or $HOME: ProtectHome hides those from the service).
python="${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "install.sh: Perch needs Python 3.11 or newer ($python is older)" >&2; exit 1; }
rm -rf "$prefix/.venv"
"$python" -m venv "$prefix/.venv"
"$prefix/.venv/bin/pip" install --quiet --upgrade pip
"$prefix/.venv/bin/pip" install --quiet "$prefix"

if [ ! -f /etc/perch/config.yaml ]; then
  sed -e 's|workspace: ./workspace |workspace: /var/lib/perch/workspace |' \
      -e 's|store: {path: ./data/perch.db}|store: {path: /var/lib/perch/perch.db}|' \
      -e 's|console: {enabled: true, user: owner}|console: {enabled: false, user: owner}|' \
      -e 's|logging: {level: INFO, format: text}|logging: {level: INFO, format: json}|' \
      "$src/config.yaml" > /etc/perch/config.yaml
  echo "Wrote /etc/perch/config.yaml: enable your channels there."
fi
if [ ! -f /etc/perch/env ]; then
  printf 'ANTHROPIC_API_KEY=\n# TELEGRAM_BOT_TOKEN=\n# SLACK_BOT_TOKEN=\n# SLACK_APP_TOKEN=\n# SIGNAL_NUMBER=\n' > /etc/perch/env
  echo "Wrote /etc/perch/env: put your API key and tokens there."
fi
chown root:perch /etc/perch/config.yaml /etc/perch/env
chmod 0640 /etc/perch/config.yaml /etc/perch/env

install -m 0644 "$src/systemd/perch.service" /etc/systemd/system/perch.service
if [ ! -d /run/systemd/system ]; then
  echo "Installed, but systemd is not running here. With the variables of /etc/perch/env"
  echo "exported, start Perch as its user from /var/lib/perch:"
  echo "  runuser -u perch -- $prefix/.venv/bin/perch run --config /etc/perch/config.yaml"
  exit 0
fi
systemctl daemon-reload
systemctl enable perch.service
echo "Installed. Start it with: systemctl start perch   (logs: journalctl -u perch -f)"
echo "Check it with: sudo -u perch PERCH_BOOTSTRAP=$prefix/bootstrap $prefix/.venv/bin/perch doctor --config /etc/perch/config.yaml"
