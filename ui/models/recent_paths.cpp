#include "ui/models/recent_paths.h"

#include <QDir>
#include <QFileInfo>
#include <QSettings>
#include <QStandardPaths>

#include <utility>

namespace parasync::ui {

RecentPaths::RecentPaths(QString settingsKey, int capacity) : m_key(std::move(settingsKey)), m_capacity(capacity) {}

RecentPaths RecentPaths::runs()
{
    return RecentPaths(QStringLiteral("recentRuns"), 10);
}

RecentPaths RecentPaths::clusterFiles()
{
    return RecentPaths(QStringLiteral("recentClusterFiles"), 8);
}

void RecentPaths::add(const QString &path)
{
    if (path.isEmpty())
        return;
    const QString absolute = QFileInfo(path).absoluteFilePath();
    QStringList recent = paths(); // what is gone leaves the settings here
    recent.removeAll(absolute);
    recent.prepend(absolute);
    while (recent.size() > m_capacity)
        recent.removeLast();
    QSettings().setValue(m_key, recent);
}

QStringList RecentPaths::paths() const
{
    QStringList existing;
    for (const QString &path : QSettings().value(m_key).toStringList())
        if (QFileInfo::exists(path))
            existing.append(path);
    return existing;
}

void RecentPaths::clear()
{
    // An empty list, not a removed key: seedOnce must not refill it.
    QSettings().setValue(m_key, QStringList());
}

QString RecentPaths::menuText(const QString &path)
{
    QString text = QDir::toNativeSeparators(path);
    const QString home = QDir::toNativeSeparators(QDir::homePath());
    if (!home.isEmpty() && home != QStringLiteral("/") && (text == home || text.startsWith(home + QDir::separator())))
        text = QLatin1Char('~') + text.mid(home.size());
    return text.replace(QLatin1Char('&'), QStringLiteral("&&"));
}

void RecentPaths::seedOnce(const QStringList &existing)
{
    QSettings settings;
    if (settings.contains(m_key))
        return;
    QStringList seeded;
    for (const QString &path : existing)
        if (seeded.size() < m_capacity)
            seeded.append(QFileInfo(path).absoluteFilePath());
    settings.setValue(m_key, seeded);
}

QString demoRunsDirectory()
{
    return QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation) + QStringLiteral("/runs");
}

QStringList demoRuns()
{
    const QDir runs(demoRunsDirectory());
    QStringList newestFirst;
    // The names carry the start time, so their order is the runs'.
    for (const QString &name : runs.entryList({QStringLiteral("demo-*")}, QDir::Dirs, QDir::Name | QDir::Reversed))
        newestFirst.append(runs.filePath(name));
    return newestFirst;
}

} // namespace parasync::ui
