# Sourced by build-image.sh and build-chroot.sh (bash): which Debian mirrors the VM images use.
# Needs SUITE set.

# The first URI this machine's apt has for a suite matching the regex $1
# (deb822 .sources or one-line .list).
find_uri() {
	local m=
	m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v suite="$1" '
		function flush() { if (u != "" && (" " s " ") ~ (" " suite " ")) { print u; found = 1; exit } u = ""; s = "" }
		/^[ \t]*#/ { next }
		/^URIs:/ { u = $2 }
		/^Suites:/ { s = $0; sub(/^Suites:[ \t]*/, "", s) }
		/^[ \t]*$/ { flush() }
		END { if (!found) flush() }') || true
	if [ -z "$m" ]; then
		m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk -v suite="^$1\$" '
			$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
				if ($(i + 1) ~ suite) { print $i; exit } }') || true
	fi
	echo "$m"
}

# The Debian mirror this machine's apt uses for $SUITE, else the one it uses
# for its own Debian release (a Debian mirror serves every release: Debian 12's
# host reaches Debian 13 through it). RTCTL_VM_MIRROR overrides.
detect_mirror() {
	local m=
	if [ -n "${RTCTL_VM_MIRROR:-}" ]; then echo "$RTCTL_VM_MIRROR"; return; fi
	m=$(find_uri "$SUITE")
	[ -n "$m" ] || m=$(find_uri '(bookworm|trixie|forky|stable|testing|sid|unstable)')
	echo "${m:-http://deb.debian.org/debian}"
}

# The same for the security archive ($SUITE-security, else any -security
# suite the host has). RTCTL_VM_SECURITY_MIRROR overrides.
detect_security_mirror() {
	local m=
	if [ -n "${RTCTL_VM_SECURITY_MIRROR:-}" ]; then echo "$RTCTL_VM_SECURITY_MIRROR"; return; fi
	m=$(find_uri "$SUITE-security")
	[ -n "$m" ] || m=$(find_uri '[a-z]+-security')
	echo "${m:-http://deb.debian.org/debian-security}"
}

# An apt state of its own in directory $1 (made here) for architecture $2, its sources.list the lines on
# stdin, each signed by Debian's keyring: the host's apt lists, preferences and dpkg database play no
# part. Sets APT_OPTS, the options apt-get and apt-cache take to use it: so not in a pipeline (a
# subshell), feed it with `< <(...)`.
private_apt() {
	local p=$1
	APT_OPTS=(-o "Dir::Etc::SourceList=$p/sources.list" -o "Dir::Etc::SourceParts=$p/none"
		-o "Dir::Etc::Preferences=$p/none/preferences" -o "Dir::Etc::PreferencesParts=$p/none"
		-o "Dir::State=$p/state" -o "Dir::State::status=$p/status" -o "Dir::Cache=$p/cache"
		-o "APT::Architecture=$2" -o Debug::NoLocking=true -o Acquire::Retries=3 -o APT::Sandbox::User=root)
	mkdir -p "$p/none" "$p/state/lists/partial" "$p/cache/archives/partial"
	: >"$p/status"
	sed 's|^deb \[|deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg |' >"$p/sources.list"
}

# One line of sources.list for suite $2 at mirror $1. Release files past their Valid-Until are taken:
# a mirror's -updates and -security Release files expire about a week after they were signed (Debian
# 13's on 2026-12-07, testing's already), and a machine without the VM caches must still build the
# images from what the package registry serves. Signatures are still checked.
deb_line() {
	echo "deb [check-valid-until=no] $1 $2 main"
}

# The image's apt sources (build-image.sh). Debian 12's image keeps the release alone, as it always
# had; a later one has its security and updates suites too (the kernel and the rest as a machine of
# that release installed today gets them).
apt_sources() {
	deb_line "$MIRROR" "$SUITE"
	[ "$SUITE" = bookworm ] && return 0
	build_sources_updates
}

# The build chroot's (build-chroot.sh): the release, its updates and its security suite.
build_sources() {
	deb_line "$MIRROR" "$SUITE"
	build_sources_updates
}

build_sources_updates() {
	deb_line "$MIRROR" "$SUITE-updates"
	deb_line "$SECURITY_MIRROR" "$SUITE-security"
}
