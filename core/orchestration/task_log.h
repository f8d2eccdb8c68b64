#pragma once

// One task's output on disk, for the tasks the app starts: the process
// panel keeps only its last lines in memory, gone when the app quits, and a
// user who asks why a task died an hour ago, or after a restart, needs them
// all. Kept in the run directory, beside the step log:
// <logdir>/logs/ps-0.log, worker-1.log, ps_backup-0.log. A task started
// again (the panel's Restart, a new launch into the same run directory)
// appends after a line saying so; a file past kMaxBytes is rotated to .1
// (.1 to .2, ... up to kKeptFiles), so a task that talks for days takes
// bounded room. Launcher's thread only.

#include "config/cluster_spec.h"

#include <QFile>
#include <QString>

#include <cstdint>

namespace parasync {

class TaskLog
{
public:
    static constexpr int64_t kMaxBytes = 8 * 1024 * 1024;
    static constexpr int kKeptFiles = 3; // besides the one written

    // The log of `task` in `runDirectory`/logs (made if missing). Nothing is
    // opened yet.
    TaskLog(const QString &runDirectory, const TaskId &task);

    // A start of the task, as a line: "=== 2026-11-29 10:15:02 started:
    // parasync-node --ps_hosts=...". Opens the file for appending; false,
    // with error(), when it cannot (the output then goes nowhere else).
    bool started(const QString &command);
    // Complete lines of the task's output, each ending in '\n'.
    void write(const QString &lines);
    // How the task ended ("exited 0", "killed by signal 9").
    void ended(const QString &how);

    QString path() const { return m_path; }
    // Why the file cannot be written; empty while it can.
    QString error() const { return m_error; }

private:
    void append(const QByteArray &bytes);
    void rotate();

    QString m_path;
    QFile m_file;
    QString m_error;
};

} // namespace parasync
