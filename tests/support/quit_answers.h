#pragma once

// Quitting the app's main window as a user does: while a cluster it started
// trains, the window asks first, and the user answers "Stop and quit".
// Header-only: the support library links no widgets.

#include <QAbstractButton>
#include <QMessageBox>
#include <QWidget>

namespace parasync::testing {

// Closes `window`; answers its quit question, if it asks one, with "Stop
// and quit". Returns whether it asked.
inline bool quitAnsweringStop(QWidget *window)
{
    window->close();
    auto *question = window->findChild<QMessageBox *>(QStringLiteral("quitQuestion"));
    if (!question || !question->isVisible())
        return false;
    question->findChild<QAbstractButton *>(QStringLiteral("stopAndQuit"))->click();
    return true;
}

} // namespace parasync::testing
