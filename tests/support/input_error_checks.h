#pragma once

// What the unit tests of bad input share: run an action and take the
// InputError it throws, and check that its message names what to fix.

#include "base/error.h"

#include <QString>
#include <QStringList>
#include <QTest>

#include <functional>

namespace parasync::testing {

// The message of the InputError `action` throws; empty when it throws none.
inline QString inputErrorOf(const std::function<void()> &action)
{
    try {
        action();
    } catch (const InputError &e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

// Fails the calling test unless `message` is a message and holds every word.
// (QVERIFY2 returns from this function only: call it as the test's last
// check, or follow it with `if (QTest::currentTestFailed()) return;`.)
inline void verifyMentions(const QString &message, const QStringList &words)
{
    QVERIFY2(!message.isEmpty(), "expected an InputError, none was thrown");
    for (const QString &word : words)
        QVERIFY2(message.contains(word), qPrintable(QStringLiteral("'%1' does not mention '%2'").arg(message, word)));
}

} // namespace parasync::testing
