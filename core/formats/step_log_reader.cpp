#include "formats/step_log_reader.h"

#include "base/error.h"
#include "formats/run_log.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>

#include <algorithm>
#include <cstring>
#include <zlib.h>

namespace parasync {

struct StepLogReader::GzFile
{
    // gzopen reads a plain file as it is: one path for both kinds.
    gzFile file = nullptr;
    QString path;
    ~GzFile()
    {
        if (file)
            gzclose(file);
    }
};

StepLogReader::StepLogReader(const QString &directory)
{
    for (const int n : segmentIndices(directory)) {
        // A plain segment is complete (it was renamed whole); its compressed
        // copy is complete only once renamed from its temporary name, and the
        // plain one is removed after that: prefer the plain one while both are.
        const QString plain = segmentPath(directory, n, false);
        m_files << (QFileInfo::exists(plain) ? plain : segmentPath(directory, n, true));
    }
    const QString current = QDir(directory).filePath(QLatin1String(run_files::kStepLog));
    if (QFileInfo::exists(current))
        m_files << current;
}

StepLogReader::~StepLogReader() = default;

QString StepLogReader::segmentPath(const QString &directory, int n, bool compressed)
{
    return QDir(directory).filePath(QStringLiteral("%1.%2%3")
                                        .arg(QLatin1String(run_files::kStepLog))
                                        .arg(n)
                                        .arg(compressed ? QStringLiteral(".gz") : QString()));
}

QList<int> StepLogReader::segmentIndices(const QString &directory)
{
    static const QRegularExpression form(QStringLiteral("^steps\\.jsonl\\.(\\d+)(\\.gz)?$"));
    QList<int> indices;
    const QStringList names
        = QDir(directory).entryList({QStringLiteral("steps.jsonl.*")}, QDir::Files | QDir::NoDotAndDotDot);
    for (const QString &name : names) {
        const auto match = form.match(name);
        if (!match.hasMatch())
            continue; // a temporary file of a compression in progress
        const int n = match.captured(1).toInt();
        if (n > 0 && !indices.contains(n))
            indices << n;
    }
    std::sort(indices.begin(), indices.end());
    return indices;
}

bool StepLogReader::openNext()
{
    m_current.reset();
    while (m_nextFile < m_files.size()) {
        auto file = std::make_unique<GzFile>();
        file->path = m_files[m_nextFile++];
        file->file = gzopen(QFile::encodeName(file->path).constData(), "rb");
        if (!file->file && !file->path.endsWith(QLatin1String(".gz")) && !QFileInfo::exists(file->path)
            && QFileInfo::exists(file->path + QLatin1String(".gz"))) {
            // A plain segment compressed since the list was made: its
            // compressed copy was complete before the plain one went.
            file->path += QLatin1String(".gz");
            file->file = gzopen(QFile::encodeName(file->path).constData(), "rb");
        }
        if (!file->file) {
            // A live run's ps:0 may have removed its oldest segment (its
            // budget) since the list was made: what is gone is skipped.
            if (!QFileInfo::exists(file->path))
                continue;
            throw InputError("cannot read " + file->path.toStdString() + ": it could not be opened");
        }
        gzbuffer(file->file, 256 * 1024);
        m_current = std::move(file);
        return true;
    }
    return false;
}

bool StepLogReader::next(QByteArray *line)
{
    line->clear();
    for (;;) {
        if (!m_current && !openNext())
            return false;
        char buffer[16 * 1024];
        bool any = false;
        while (gzgets(m_current->file, buffer, int(sizeof buffer))) {
            any = true;
            const qsizetype length = qsizetype(std::strlen(buffer));
            if (length > 0 && buffer[length - 1] == '\n') {
                line->append(buffer, length - 1);
                return true;
            }
            line->append(buffer, length);
        }
        int error = Z_OK;
        const char *message = gzerror(m_current->file, &error);
        if (error != Z_OK && error != Z_BUF_ERROR)
            throw InputError("cannot read " + m_current->path.toStdString() + ": " + message
                             + " (a damaged compressed segment of the step log)");
        // Z_BUF_ERROR: a compressed file cut short (its writer was killed);
        // what it held up to there has been read.
        m_current.reset();
        if (any && !line->isEmpty())
            return true; // the file's last line had no newline
    }
}

} // namespace parasync
