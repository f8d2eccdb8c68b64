#pragma once

// The reader beside RunLog, the step log's writer: a run directory's step
// log read as one, whether or not RunLog rotated it.

#include <QByteArray>
#include <QString>
#include <QStringList>

#include <memory>

namespace parasync {

// Reads a run directory's step log as one file: its rotated segments in the
// order they were written (steps.jsonl.1.gz, steps.jsonl.2.gz, ...; a segment
// not compressed yet is read as steps.jsonl.N), then steps.jsonl. Lines come
// without their newline; a torn last line (a killed writer) comes as it is,
// and the callers skip what does not parse. Not thread-safe.
class StepLogReader
{
public:
    explicit StepLogReader(const QString &directory);
    ~StepLogReader();
    StepLogReader(const StepLogReader &) = delete;
    StepLogReader &operator=(const StepLogReader &) = delete;

    // Whether the directory holds a step log at all.
    bool exists() const { return !m_files.isEmpty(); }
    // The files, oldest first.
    const QStringList &files() const { return m_files; }
    // The next line; false at the end. Throws InputError when a file cannot
    // be opened or a compressed one is damaged, naming it.
    bool next(QByteArray *line);

    // A rotated segment's path for index `n` (1, 2, ...), compressed or not.
    static QString segmentPath(const QString &directory, int n, bool compressed);
    // The rotated segments' indices present, in order.
    static QList<int> segmentIndices(const QString &directory);

private:
    bool openNext();

    QStringList m_files;
    qsizetype m_nextFile = 0;
    struct GzFile;
    std::unique_ptr<GzFile> m_current;
};

} // namespace parasync
