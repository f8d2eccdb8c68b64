#pragma once

#include "config/task_options.h"

#include <string>

namespace parasync {

// The TLS material of a task or a client, read once at start. PEM text,
// handed to gRPC's SSL credentials for every channel and server.
struct TlsMaterial
{
    std::string certPem; // this side's certificate (servers; clients under mutual TLS)
    std::string keyPem;
    std::string caPem;   // the CA that must have signed the peer's certificate
    bool mutual = false; // servers require and verify a client certificate
    bool enabled() const { return !caPem.empty(); }
};

// Reads and checks the files the connection flags name, so that a mistake
// is reported at start, naming the flag and the fix, rather than as a failed
// handshake on the first call. A task (`serving`) needs --tls_cert, --tls_key
// and --tls_ca; a client (--status, the app) needs --tls_ca, and a
// certificate and key for mutual TLS. Checks that the key belongs to the
// certificate and that --tls_ca signed it. Empty material when no TLS flag is
// given. Throws InputError.
TlsMaterial loadTlsMaterial(const ConnectionOptions &options, bool serving);

// Throws InputError unless the certificate names `host` (an IP address or
// DNS name in its subjectAltName): peers connecting to that address would
// refuse the handshake otherwise.
void checkCertificateNames(const std::string &certPem, const std::string &host, const std::string &who);

} // namespace parasync
