// Package e2e drives the outbox console of runtime/outboxconsole in real headless Chromium,
// Debian's chromium, through chromedp. It is a module of its own, so that chromedp never
// becomes a dependency of the core module. scripts-test.sh installs chromium when it is
// missing and runs the test. scripts/test runs that script once per database server.
package e2e
