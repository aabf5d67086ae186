#!/usr/bin/env bash
# Install Perch as a hardened system service (run as root from a checkout):
#   sudo systemd/install.sh            # or: sudo make install-service
#   sudo systemd/install.sh --exec     # also allow the exec sandbox (systemd/exec-sandbox.conf)
# Copies the checkout to /opt/perch, builds its virtualenv, creates the `perch` user, writes
# /etc/perch/config.yaml (state under /var/lib/perch, console off, JSON logs, secrets read
# with ${cred:NAME}), one root-only file per secret in /etc/perch/credentials (put the API key
# and channel tokens there; systemd hands them to the service with LoadCredential=), and
# /etc/perch/env for non-secret settings, then enables the unit.
# Re-running it upgrades the code and keeps your config, credentials, env file and data.
set -euo pipefail
with_exec=no
[ "${1:-}" = --exec ] && with_exec=yes
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
      -e 's|${ANTHROPIC_API_KEY}|${cred:anthropic_api_key}|' \
      -e 's|${TELEGRAM_BOT_TOKEN:-}|${cred:telegram_bot_token}|' \
      -e 's|${TELEGRAM_WEBHOOK_SECRET:-}|${cred:telegram_webhook_secret}|' \
      -e 's|${SLACK_BOT_TOKEN:-}|${cred:slack_bot_token}|' \
      -e 's|${SLACK_APP_TOKEN:-}|${cred:slack_app_token}|' \
      -e 's|${SLACK_SIGNING_SECRET:-}|${cred:slack_signing_secret}|' \
      "$src/config.yaml" > /etc/perch/config.yaml
  echo "Wrote /etc/perch/config.yaml: enable your channels there."
fi
if [ ! -f /etc/perch/env ]; then
  printf '# Non-secret settings only; secrets go in /etc/perch/credentials/.\n# SIGNAL_NUMBER=\n' > /etc/perch/env
fi
# Secrets: root-only files; systemd copies them into the service's credentials directory.
install -d -m 0700 -o root -g root /etc/perch/credentials
for name in anthropic_api_key telegram_bot_token telegram_webhook_secret \
            slack_bot_token slack_app_token slack_signing_secret; do
  [ -f "/etc/perch/credentials/$name" ] || install -m 0600 -o root -g root /dev/null "/etc/perch/credentials/$name"
done
echo "Put your API key in /etc/perch/credentials/anthropic_api_key (and channel tokens next to it)."
chown root:perch /etc/perch/config.yaml /etc/perch/env
chmod 0640 /etc/perch/config.yaml /etc/perch/env

install -m 0644 "$src/systemd/perch.service" /etc/systemd/system/perch.service
if [ "$with_exec" = yes ]; then
  command -v bwrap >/dev/null || apt-get install -y -qq bubblewrap
  install -D -m 0644 "$src/systemd/exec-sandbox.conf" /etc/systemd/system/perch.service.d/exec-sandbox.conf
fi
if [ ! -d /run/systemd/system ]; then
  echo "Installed, but systemd is not running here. With the variables of /etc/perch/env"
  echo "exported and CREDENTIALS_DIRECTORY=/etc/perch/credentials (readable by perch),"
  echo "start Perch as its user from /var/lib/perch:"
  echo "  runuser -u perch -- $prefix/.venv/bin/perch run --config /etc/perch/config.yaml"
  exit 0
fi
systemctl daemon-reload
systemctl enable perch.service
echo "Installed. Start it with: systemctl start perch   (logs: journalctl -u perch -f)"
echo "Check it (as the service, with its credentials):"
echo "  sudo systemd-run --pipe --wait --quiet -p User=perch -p WorkingDirectory=/var/lib/perch \\"
echo "    -p EnvironmentFile=-/etc/perch/env -p Environment=PERCH_BOOTSTRAP=$prefix/bootstrap \\"
echo "    \$(sed -n 's/^LoadCredential=/-p LoadCredential=/p' /etc/systemd/system/perch.service) \\"
echo "    $prefix/.venv/bin/perch doctor --config /etc/perch/config.yaml"
