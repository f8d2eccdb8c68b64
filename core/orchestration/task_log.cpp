#include "orchestration/task_log.h"

#include "formats/run_log.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>

namespace parasync {

TaskLog::TaskLog(const QString &runDirectory, const TaskId &task)
    : m_path(QDir(runDirectory)
                 .filePath(QLatin1String(run_files::kTaskLogs) + QLatin1Char('/')
                           + QString::fromStdString(task.toString()).replace(QLatin1Char(':'), QLatin1Char('-'))
                           + QStringLiteral(".log")))
{
}

bool TaskLog::started(const QString &command)
{
    if (!m_file.isOpen()) {
        const QString directory = QFileInfo(m_path).absolutePath();
        m_file.setFileName(m_path);
        if (!QDir().mkpath(directory) || !m_file.open(QIODevice::WriteOnly | QIODevice::Append)) {
            m_error = QStringLiteral("cannot write this task's log %1: %2").arg(m_path, m_file.errorString());
            return false;
        }
        m_error.clear();
    }
    append(QStringLiteral("=== %1 started: %2\n")
               .arg(QDateTime::currentDateTime().toString(Qt::ISODate), command)
               .toUtf8());
    return true;
}

void TaskLog::write(const QString &lines)
{
    if (m_file.isOpen())
        append(lines.toUtf8());
}

void TaskLog::ended(const QString &how)
{
    if (!m_file.isOpen())
        return;
    append(QStringLiteral("=== %1 %2\n").arg(QDateTime::currentDateTime().toString(Qt::ISODate), how).toUtf8());
}

void TaskLog::append(const QByteArray &bytes)
{
    if (m_file.size() + bytes.size() > kMaxBytes && m_file.size() > 0)
        rotate();
    // Flushed at once: the log is read while the task runs, and must hold
    // the last lines of a task (or an app) that dies.
    if (m_file.write(bytes) != bytes.size() || !m_file.flush())
        m_error = QStringLiteral("cannot write this task's log %1: %2").arg(m_path, m_file.errorString());
}

void TaskLog::rotate()
{
    m_file.close();
    QFile::remove(m_path + QStringLiteral(".%1").arg(kKeptFiles));
    for (int i = kKeptFiles - 1; i >= 1; --i)
        QFile::rename(m_path + QStringLiteral(".%1").arg(i), m_path + QStringLiteral(".%1").arg(i + 1));
    QFile::rename(m_path, m_path + QStringLiteral(".1"));
    if (!m_file.open(QIODevice::WriteOnly | QIODevice::Append))
        m_error = QStringLiteral("cannot write this task's log %1: %2").arg(m_path, m_file.errorString());
}

} // namespace parasync
