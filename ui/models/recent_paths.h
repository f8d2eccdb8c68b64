#pragma once

// The window's "recent" lists -- run directories (Runs -> Recent runs) and
// cluster files (Cluster -> Recent cluster files) -- kept in the app's
// QSettings so that they outlive the window: newest first, each path once,
// at most `capacity`. A path that is gone from disk (a run deleted, the
// demo's oldest runs cleared away) is not offered again.

#include <QString>
#include <QStringList>

namespace parasync::ui {

class RecentPaths
{
public:
    RecentPaths(QString settingsKey, int capacity);

    // The run directories launched, connected to (with a run directory),
    // replayed or opened.
    static RecentPaths runs();
    static RecentPaths clusterFiles();

    // Moves `path` (made absolute) to the front. It need not exist yet: a
    // run's directory appears once its tasks start writing it.
    void add(const QString &path);
    // Newest first; only those still on disk.
    QStringList paths() const;
    void clear();
    bool isEmpty() const { return paths().isEmpty(); }

    // How a menu shows `path`: the home directory as "~", and '&' doubled
    // so that it is not taken for a mnemonic.
    static QString menuText(const QString &path);

    // The demo's runs made before this list existed (the window's own
    // folder of demo runs), newest first, so that a first look at Recent
    // runs already finds them. Only when the list was never written.
    void seedOnce(const QStringList &existing);

private:
    QString m_key;
    int m_capacity;
};

// Where the window's demo keeps its runs (each in demo-YYYYMMDD-HHMMSS-zzz):
// the app's data folder, ~/.local/share/Parasync/parasync/runs on Linux.
QString demoRunsDirectory();
// The demo runs there, newest first.
QStringList demoRuns();

} // namespace parasync::ui
