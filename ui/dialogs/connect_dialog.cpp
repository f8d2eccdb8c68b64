#include "ui/dialogs/connect_dialog.h"

#include "base/error.h"
#include "config/cluster_spec.h"

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QToolButton>
#include <QVBoxLayout>

namespace parasync::ui {

namespace {

// The keys under which the dialog remembers its fields. There is none for
// the token: QSettings is a plain file others may read.
const QString kAddress = QStringLiteral("connect/address");
const QString kRunDirectory = QStringLiteral("connect/runDirectory");
const QString kTokenFile = QStringLiteral("connect/tokenFile");
const QString kTlsCa = QStringLiteral("connect/tlsCa");
const QString kTlsCert = QStringLiteral("connect/tlsCert");
const QString kTlsKey = QStringLiteral("connect/tlsKey");

std::string text(const QString &value)
{
    return value.trimmed().toStdString();
}

// A line edit with a "..." button that picks a file (or a directory).
QWidget *withBrowse(QLineEdit *edit, bool directory, QWidget *parent)
{
    auto *row = new QWidget(parent);
    auto *layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(edit);
    auto *browse = new QToolButton(row);
    browse->setText(QStringLiteral("..."));
    QObject::connect(browse, &QToolButton::clicked, edit, [edit, directory] {
        const QString chosen = directory
                                   ? QFileDialog::getExistingDirectory(edit, QObject::tr("Run directory"), edit->text())
                                   : QFileDialog::getOpenFileName(edit, QObject::tr("Choose a file"), edit->text());
        if (!chosen.isEmpty())
            edit->setText(chosen);
    });
    layout->addWidget(browse);
    return row;
}

} // namespace

ConnectDialog::ConnectDialog(QWidget *parent)
    : QDialog(parent)
    , m_address(new QLineEdit(this))
    , m_runDirectory(new QLineEdit(this))
    , m_tokenFile(new QLineEdit(this))
    , m_token(new QLineEdit(this))
    , m_tlsCa(new QLineEdit(this))
    , m_tlsCert(new QLineEdit(this))
    , m_tlsKey(new QLineEdit(this))
    , m_error(new QLabel(this))
{
    setWindowTitle(tr("Connect to a running cluster"));
    m_address->setObjectName(QStringLiteral("connectAddress"));
    m_address->setPlaceholderText(QStringLiteral("127.0.0.1:2222"));
    m_runDirectory->setObjectName(QStringLiteral("connectRunDirectory"));
    m_runDirectory->setPlaceholderText(tr("optional: its --logdir, for the history before now"));
    m_tokenFile->setObjectName(QStringLiteral("connectTokenFile"));
    m_tokenFile->setPlaceholderText(tr("optional: a file (mode 0600) holding the cluster token"));
    m_token->setObjectName(QStringLiteral("connectToken"));
    m_token->setEchoMode(QLineEdit::Password);
    m_token->setPlaceholderText(tr("or paste the token (not saved)"));
    m_tlsCa->setObjectName(QStringLiteral("connectTlsCa"));
    m_tlsCa->setPlaceholderText(tr("TLS: the CA that signed the cluster's certificates"));
    m_tlsCert->setObjectName(QStringLiteral("connectTlsCert"));
    m_tlsCert->setPlaceholderText(tr("mutual TLS: this app's certificate"));
    m_tlsKey->setObjectName(QStringLiteral("connectTlsKey"));
    m_tlsKey->setPlaceholderText(tr("mutual TLS: its key"));
    m_error->setObjectName(QStringLiteral("connectError"));
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #b00020"));

    auto *form = new QFormLayout;
    form->addRow(tr("ps:0 address"), m_address);
    form->addRow(tr("Run directory"), withBrowse(m_runDirectory, true, this));
    form->addRow(tr("Token file"), withBrowse(m_tokenFile, false, this));
    form->addRow(tr("Token"), m_token);
    form->addRow(tr("TLS CA"), withBrowse(m_tlsCa, false, this));
    form->addRow(tr("TLS certificate"), withBrowse(m_tlsCert, false, this));
    form->addRow(tr("TLS key"), withBrowse(m_tlsKey, false, this));

    auto *note = new QLabel(tr("The cluster keeps running when you disconnect or quit. Leave the token empty to use "
                               "$PARASYNC_CLUSTER_TOKEN; a pasted token is used for this connection only."),
                            this);
    note->setWordWrap(true);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Connect"));
    connect(buttons, &QDialogButtonBox::accepted, this, &ConnectDialog::validate);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(note);
    layout->addWidget(m_error);
    layout->addWidget(buttons);
    m_error->hide();
    resize(560, sizeHint().height());
}

ConnectRequest ConnectDialog::request() const
{
    ConnectRequest r;
    r.address = m_address->text().trimmed();
    r.runDirectory = m_runDirectory->text().trimmed();
    r.tokenFile = m_tokenFile->text().trimmed();
    r.token = m_token->text().trimmed();
    r.connection.tlsCa = text(m_tlsCa->text());
    r.connection.tlsCert = text(m_tlsCert->text());
    r.connection.tlsKey = text(m_tlsKey->text());
    return r;
}

void ConnectDialog::setRequest(const ConnectRequest &r)
{
    m_address->setText(r.address);
    m_runDirectory->setText(r.runDirectory);
    m_tokenFile->setText(r.tokenFile);
    m_token->setText(r.token);
    m_tlsCa->setText(QString::fromStdString(r.connection.tlsCa));
    m_tlsCert->setText(QString::fromStdString(r.connection.tlsCert));
    m_tlsKey->setText(QString::fromStdString(r.connection.tlsKey));
}

// Checked here, so the person fixes a field while the dialog is open.
void ConnectDialog::validate()
{
    const ConnectRequest r = request();
    try {
        if (r.address.isEmpty())
            throw InputError("give ps:0's address as host:port, e.g. 10.0.0.5:2222");
        parseHostPort(text(r.address));
        (void)r.rpcSettings();
    } catch (const InputError &e) {
        m_error->setText(QString::fromStdString(e.what()));
        m_error->show();
        return;
    }
    accept();
}

ConnectRequest ConnectDialog::remembered()
{
    const QSettings settings;
    ConnectRequest r;
    r.address = settings.value(kAddress, QStringLiteral("127.0.0.1:2222")).toString();
    r.runDirectory = settings.value(kRunDirectory).toString();
    r.tokenFile = settings.value(kTokenFile).toString();
    r.connection.tlsCa = settings.value(kTlsCa).toString().toStdString();
    r.connection.tlsCert = settings.value(kTlsCert).toString().toStdString();
    r.connection.tlsKey = settings.value(kTlsKey).toString().toStdString();
    return r;
}

void ConnectDialog::remember(const ConnectRequest &r)
{
    QSettings settings;
    settings.setValue(kAddress, r.address);
    settings.setValue(kRunDirectory, r.runDirectory);
    settings.setValue(kTokenFile, r.tokenFile);
    settings.setValue(kTlsCa, QString::fromStdString(r.connection.tlsCa));
    settings.setValue(kTlsCert, QString::fromStdString(r.connection.tlsCert));
    settings.setValue(kTlsKey, QString::fromStdString(r.connection.tlsKey));
}

} // namespace parasync::ui
