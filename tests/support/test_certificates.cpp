#include "support/test_certificates.h"

#include <QFile>
#include <QProcess>

namespace parasync::testing {

namespace {

bool openssl(const QDir &dir, const QStringList &arguments)
{
    QProcess process;
    process.setWorkingDirectory(dir.path());
    process.start(QStringLiteral("openssl"), arguments);
    if (!process.waitForFinished(30000) || process.exitCode() != 0) {
        qWarning("openssl %s: %s", qPrintable(arguments.join(QLatin1Char(' '))),
                 process.readAllStandardError().constData());
        return false;
    }
    return true;
}

} // namespace

bool makeCa(const QDir &dir, const QString &name)
{
    return openssl(dir,
                   {QStringLiteral("req"), QStringLiteral("-x509"), QStringLiteral("-newkey"), QStringLiteral("ec"),
                    QStringLiteral("-pkeyopt"), QStringLiteral("ec_paramgen_curve:prime256v1"),
                    QStringLiteral("-nodes"), QStringLiteral("-keyout"), name + QStringLiteral(".key"),
                    QStringLiteral("-out"), name + QStringLiteral(".pem"), QStringLiteral("-days"), QStringLiteral("2"),
                    QStringLiteral("-subj"), QStringLiteral("/CN=") + name});
}

bool makeSigned(const QDir &dir, const QString &name, const QString &ca, const QString &altNames)
{
    QFile extensions(dir.filePath(name + QStringLiteral(".ext")));
    if (!extensions.open(QIODevice::WriteOnly))
        return false;
    extensions.write("subjectAltName=" + altNames.toUtf8() + "\n");
    extensions.close();
    return openssl(dir,
                   {QStringLiteral("req"), QStringLiteral("-newkey"), QStringLiteral("ec"), QStringLiteral("-pkeyopt"),
                    QStringLiteral("ec_paramgen_curve:prime256v1"), QStringLiteral("-nodes"), QStringLiteral("-keyout"),
                    name + QStringLiteral(".key"), QStringLiteral("-out"), name + QStringLiteral(".csr"),
                    QStringLiteral("-subj"), QStringLiteral("/CN=") + name})
           && openssl(dir, {QStringLiteral("x509"), QStringLiteral("-req"), QStringLiteral("-in"),
                            name + QStringLiteral(".csr"), QStringLiteral("-CA"), ca + QStringLiteral(".pem"),
                            QStringLiteral("-CAkey"), ca + QStringLiteral(".key"), QStringLiteral("-CAcreateserial"),
                            QStringLiteral("-out"), name + QStringLiteral(".pem"), QStringLiteral("-days"),
                            QStringLiteral("2"), QStringLiteral("-extfile"), name + QStringLiteral(".ext")});
}

ConnectionOptions tlsFiles(const QDir &dir, const QString &ca, const QString &identity, bool mutual)
{
    ConnectionOptions options;
    options.tlsCa = dir.filePath(ca + QStringLiteral(".pem")).toStdString();
    if (!identity.isEmpty()) {
        options.tlsCert = dir.filePath(identity + QStringLiteral(".pem")).toStdString();
        options.tlsKey = dir.filePath(identity + QStringLiteral(".key")).toStdString();
    }
    options.tlsMutual = mutual;
    return options;
}

} // namespace parasync::testing
