#!/bin/sh
# Remakes keepassxc-2.7.4.csv with Debian's real KeePassXC (apt-get install keepassxc): a database with a key
# file and no password, three entries (a group, a password with a quote and a comma, notes over two lines,
# non-ASCII text, a URL with a port and a query, an ssh URL), exported by `keepassxc-cli export -f csv`.
# The times in the file are those of the run; Tests/CredentialExchangeTests/PasswordCSVTests.swift expects the
# committed ones.
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
head -c 64 /dev/urandom > key
keepassxc-cli db-create -q --set-key-file key db.kdbx
keepassxc-cli mkdir -q --no-password -k key db.kdbx Internet
printf 'pa"ss,word\n' | keepassxc-cli add -q --no-password -k key -u alice@example.com \
    --url 'https://accounts.example.com:8443/login?next=1' --notes 'first line
second, "quoted" line' -p db.kdbx 'Internet/Example Login'
printf 'hunter2\n' | keepassxc-cli add -q --no-password -k key -u bob -p db.kdbx 'Wi-Fi Büro'
printf 'über-sicher\n' | keepassxc-cli add -q --no-password -k key --url 'ssh://git.example.org' -p db.kdbx \
    'Internet/Git server'
keepassxc-cli export -q --no-password -k key -f csv db.kdbx
