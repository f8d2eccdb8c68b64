#pragma once

// Connect to a cluster started elsewhere: ps:0's address, where its run
// directory is (for the history before now), and how to get in -- the
// cluster token and the TLS files. The token is never saved: a token file is
// remembered by its path, a pasted token is forgotten with the dialog.

#include "orchestration/connect_request.h"

#include <QDialog>
#include <QString>

class QCheckBox;
class QLabel;
class QLineEdit;

namespace parasync::ui {

class ConnectDialog : public QDialog
{
    Q_OBJECT

public:
    explicit ConnectDialog(QWidget *parent = nullptr);

    ConnectRequest request() const;
    void setRequest(const ConnectRequest &request);

    // What was used last (QSettings): everything but a pasted token.
    static ConnectRequest remembered();
    static void remember(const ConnectRequest &request);

private:
    void validate();

    QLineEdit *m_address;
    QLineEdit *m_runDirectory;
    QLineEdit *m_tokenFile;
    QLineEdit *m_token;
    QLineEdit *m_tlsCa;
    QLineEdit *m_tlsCert;
    QLineEdit *m_tlsKey;
    QLabel *m_error;
};

} // namespace parasync::ui
