#pragma once

// Reads run directories (replayRunDirectory) off the GUI thread and hands
// back value snapshots: a long run's step log never freezes the window.

#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"

#include <QObject>
#include <QString>

#include <memory>
#include <thread>
#include <vector>

namespace parasync::ui {

struct LoadedRun
{
    QString directory;
    std::shared_ptr<const RunSnapshot> snapshot; // null when loading failed
    RunDirectoryInfo info;
    QString error; // what went wrong and what to do
};

class RunLoader : public QObject
{
    Q_OBJECT

public:
    explicit RunLoader(QObject *parent = nullptr);
    ~RunLoader() override; // waits for loads still running

    // Starts loading; `loaded` follows on this object's thread.
    void load(const QString &directory);
    // Loads on the calling thread (headless mode, tests).
    static LoadedRun loadNow(const QString &directory);

Q_SIGNALS:
    void loaded(const parasync::ui::LoadedRun &run);

private:
    std::vector<std::thread> m_threads;
};

} // namespace parasync::ui

Q_DECLARE_METATYPE(parasync::ui::LoadedRun)
