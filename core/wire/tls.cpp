#include "wire/tls.h"

#include "base/error.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <memory>
#include <sstream>

namespace parasync {

namespace {

template<typename T, void (*Free)(T *)>
struct Deleter
{
    void operator()(T *p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Certificate = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Store = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreContext = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;

std::string readPem(const std::string &path, const char *flag)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw InputError(std::string("--") + flag + "=" + path
                         + ": cannot read it (does it exist, and may this user read it?)");
    std::ostringstream text;
    text << in.rdbuf();
    if (text.str().find("-----BEGIN ") == std::string::npos)
        throw InputError(std::string("--") + flag + "=" + path + ": not a PEM file (no -----BEGIN line)");
    return text.str();
}

Bio memoryBio(const std::string &pem)
{
    return Bio(BIO_new_mem_buf(pem.data(), int(pem.size())));
}

Certificate parseCertificate(const std::string &pem, const std::string &what)
{
    Certificate cert(PEM_read_bio_X509(memoryBio(pem).get(), nullptr, nullptr, nullptr));
    if (!cert)
        throw InputError(what + ": holds no X.509 certificate");
    return cert;
}

std::string opensslError()
{
    const unsigned long code = ERR_get_error();
    ERR_clear_error();
    if (code == 0)
        return "unknown reason";
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    return text;
}

} // namespace

TlsMaterial loadTlsMaterial(const ConnectionOptions &options, bool serving)
{
    TlsMaterial tls;
    if (!options.tls())
        return tls;
    if (options.tlsCa.empty())
        throw InputError("TLS needs --tls_ca=PATH, the CA certificate that signed the tasks' certificates");
    if (serving && (options.tlsCert.empty() || options.tlsKey.empty()))
        throw InputError("a task both serves and calls over TLS: give --tls_cert and --tls_key (its certificate "
                         "and key) with --tls_ca");
    if (options.tlsCert.empty() != options.tlsKey.empty())
        throw InputError(options.tlsCert.empty() ? "--tls_key given without --tls_cert: give both"
                                                 : "--tls_cert given without --tls_key: give both");
    if (options.tlsMutual && options.tlsCert.empty())
        throw InputError("--tls_mutual: the servers will ask for a client certificate; give --tls_cert and --tls_key");

    tls.caPem = readPem(options.tlsCa, "tls_ca");
    tls.mutual = options.tlsMutual;
    const Certificate ca = parseCertificate(tls.caPem, "--tls_ca=" + options.tlsCa);
    if (options.tlsCert.empty())
        return tls;

    tls.certPem = readPem(options.tlsCert, "tls_cert");
    tls.keyPem = readPem(options.tlsKey, "tls_key");
    const Certificate cert = parseCertificate(tls.certPem, "--tls_cert=" + options.tlsCert);
    const Key key(PEM_read_bio_PrivateKey(memoryBio(tls.keyPem).get(), nullptr, nullptr, nullptr));
    if (!key)
        throw InputError("--tls_key=" + options.tlsKey + ": holds no private key we can read (" + opensslError()
                         + "; an encrypted key needs its passphrase removed: openssl pkey -in KEY -out KEY.plain)");
    if (X509_check_private_key(cert.get(), key.get()) != 1) {
        ERR_clear_error();
        throw InputError("--tls_key=" + options.tlsKey + " is not the private key of --tls_cert=" + options.tlsCert);
    }

    // Peers verify this certificate against the same CA: check it now.
    const Store store(X509_STORE_new());
    X509_STORE_add_cert(store.get(), ca.get());
    const StoreContext context(X509_STORE_CTX_new());
    X509_STORE_CTX_init(context.get(), store.get(), cert.get(), nullptr);
    if (X509_verify_cert(context.get()) != 1) {
        const int error = X509_STORE_CTX_get_error(context.get());
        ERR_clear_error();
        throw InputError("--tls_cert=" + options.tlsCert + " does not verify against --tls_ca=" + options.tlsCa + " ("
                         + X509_verify_cert_error_string(error)
                         + "): the other tasks would refuse it; sign it with that CA or give the CA that signed it");
    }
    return tls;
}

void checkCertificateNames(const std::string &certPem, const std::string &host, const std::string &who)
{
    const Certificate cert = parseCertificate(certPem, who);
    const bool named = X509_check_ip_asc(cert.get(), host.c_str(), 0) == 1
                       || X509_check_host(cert.get(), host.data(), host.size(), 0, nullptr) == 1;
    ERR_clear_error();
    if (!named)
        throw InputError(who + " does not name " + host
                         + " (as an IP or DNS subjectAltName): the other tasks connect to that address and would "
                           "refuse the handshake; issue the certificate with subjectAltName=IP:"
                         + host + " or DNS:" + host);
}

} // namespace parasync
