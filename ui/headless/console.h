#pragma once

// What a headless run prints: a line of its story on stdout, a problem on
// stderr, each flushed at once so that a script (or `tee`) sees it as it
// happens, in order.

#include <QString>

namespace parasync::ui {

void say(const QString &line);
void complain(const QString &line);

} // namespace parasync::ui
