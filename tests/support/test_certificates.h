#pragma once

// Certificates for TLS tests, made the way an operator makes them: with the
// openssl command line, into a temporary directory.

#include "config/task_options.h"

#include <QDir>
#include <QString>

namespace parasync::testing {

// A self-signed CA: <dir>/<name>.pem and <name>.key.
bool makeCa(const QDir &dir, const QString &name);

// A certificate + key for `altNames` (e.g. "IP:127.0.0.1") signed by the CA
// `ca` made by makeCa: <dir>/<name>.pem and <name>.key.
bool makeSigned(const QDir &dir, const QString &name, const QString &ca, const QString &altNames);

// The TLS flags' values for a task or client trusting `ca`, presenting
// `identity`'s certificate if not empty.
ConnectionOptions tlsFiles(const QDir &dir, const QString &ca, const QString &identity, bool mutual);

} // namespace parasync::testing
