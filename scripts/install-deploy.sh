#!/usr/bin/env bash
# scripts/install-deploy.sh install|uninstall: puts deploy/ in place for the agent to run
# as a systemd service (make install, through scripts/install.sh), or removes what that
# put there (make uninstall). From the environment:
#
#   PREFIX          where Shoal is installed (/usr/local); BINDIR under it by default
#   SYSCONFDIR      where the configuration goes, SYSCONFDIR/shoal/agent.toml: /etc for
#                   the prefixes /usr and /usr/local, else PREFIX/etc
#   SYSTEMDUNITDIR  where the unit goes: PREFIX/lib/systemd/system (systemd reads it for
#                   /usr and /usr/local; under another prefix, 'systemctl link' it)
#   DESTDIR         a staging root prepended to every path written, not to those recorded
#
# So an install under a prefix of its own (/opt/shoal) writes nothing outside it.
#
# The unit is deploy/shoal-agent.service with the installed binary and configuration
# in its ExecStart. The configuration is installed as SYSCONFDIR/shoal/agent.toml.example,
# always, and as agent.toml only where there is none: an existing one, edited or not,
# is never written over. Uninstalling removes the unit, the example, and agent.toml
# only when it is still the example as installed.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
if [ "$mode" != install ] && [ "$mode" != uninstall ]; then
	echo "usage: scripts/install-deploy.sh install|uninstall" >&2
	exit 2
fi
PREFIX=${PREFIX:-/usr/local}
BINDIR=${BINDIR:-$PREFIX/bin}
case $PREFIX in
/usr | /usr/local) sysconfdir=/etc ;;
*) sysconfdir=$PREFIX/etc ;;
esac
SYSCONFDIR=${SYSCONFDIR:-$sysconfdir}
SYSTEMDUNITDIR=${SYSTEMDUNITDIR:-$PREFIX/lib/systemd/system}
DESTDIR=${DESTDIR:-}
for var in PREFIX BINDIR SYSCONFDIR SYSTEMDUNITDIR; do
	case ${!var} in
	/*) ;;
	*) echo "$mode: $var must be an absolute path, not '${!var}'" >&2; exit 1 ;;
	esac
done

d=$DESTDIR
unit=$d$SYSTEMDUNITDIR/shoal-agent.service
confdir=$d$SYSCONFDIR/shoal
config=$SYSCONFDIR/shoal/agent.toml

if [ "$mode" = uninstall ]; then
	rm -f "$unit"
	if [ -e "$confdir/agent.toml" ] && [ -e "$confdir/agent.toml.example" ] &&
		cmp -s "$confdir/agent.toml" "$confdir/agent.toml.example"; then
		rm -f "$confdir/agent.toml"
	elif [ -e "$confdir/agent.toml" ]; then
		echo "uninstall: kept $confdir/agent.toml: it was changed since it was installed"
	fi
	rm -f "$confdir/agent.toml.example"
	# Only the directories that hold nothing but Shoal's files; the prefix's own stay.
	rmdir "$confdir" 2>/dev/null || true
	if [ "$SYSCONFDIR" = "$PREFIX/etc" ]; then
		rmdir "$d$SYSCONFDIR" 2>/dev/null || true
	fi
	if [ "$SYSTEMDUNITDIR" = "$PREFIX/lib/systemd/system" ]; then
		rmdir "$d$SYSTEMDUNITDIR" "$d$PREFIX/lib/systemd" 2>/dev/null || true
	fi
	echo "uninstall: removed the agent's systemd unit from $d$SYSTEMDUNITDIR"
	exit 0
fi

install -d "$d$SYSTEMDUNITDIR" "$confdir"
sed -e "s|^ExecStart=.*|ExecStart=$BINDIR/shoal agent --config $config|" \
	-e "/^#/s|/usr/local/bin/shoal|$BINDIR/shoal|" \
	-e "/^#/s|/etc/shoal/agent.toml|$config|g" \
	-e "/^#/s|/usr/local/lib/systemd/system/|$SYSTEMDUNITDIR/|" \
	deploy/shoal-agent.service >"$unit"
chmod 644 "$unit"
install -m 644 deploy/agent.toml "$confdir/agent.toml.example"
if [ -e "$confdir/agent.toml" ]; then
	echo "install: kept $confdir/agent.toml; the one this version ships is $confdir/agent.toml.example"
else
	install -m 644 deploy/agent.toml "$confdir/agent.toml"
fi
echo "install: the agent's systemd unit in $unit, its configuration in $confdir/agent.toml"
case $SYSTEMDUNITDIR in
/usr/lib/systemd/system | /usr/local/lib/systemd/system | /etc/systemd/system | /lib/systemd/system) enable="systemctl daemon-reload; systemctl enable --now shoal-agent" ;;
*) enable="systemctl link $SYSTEMDUNITDIR/shoal-agent.service; systemctl enable --now shoal-agent" ;;
esac
echo "install: edit it (init or join), then: $enable"
