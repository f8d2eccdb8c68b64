#include "ui/models/run_loader.h"

#include "base/error.h"

#include <QDir>
#include <QMetaObject>

namespace parasync::ui {

RunLoader::RunLoader(QObject *parent) : QObject(parent) {}

RunLoader::~RunLoader()
{
    for (std::thread &thread : m_threads)
        if (thread.joinable())
            thread.join();
}

LoadedRun RunLoader::loadNow(const QString &directory)
{
    LoadedRun run;
    run.directory = QDir(directory).absolutePath();
    try {
        // A replay keeps more steps in full detail than a live view: the
        // whole interleaving of a typical run stays visible.
        RunState state(200000);
        run.info = replayRunDirectory(directory.toStdString(), &state);
        run.snapshot = std::make_shared<const RunSnapshot>(state.snapshot());
    } catch (const InputError &error) {
        run.error = QString::fromStdString(error.what());
    } catch (const std::exception &error) {
        run.error
            = QObject::tr("Could not read the run directory %1: %2").arg(directory, QString::fromUtf8(error.what()));
    }
    return run;
}

void RunLoader::load(const QString &directory)
{
    m_threads.emplace_back([this, directory] {
        LoadedRun run = loadNow(directory);
        // Queued to this object's thread; dropped if the object is gone
        // (the destructor joins first, so it is not).
        QMetaObject::invokeMethod(
            this, [this, run] { Q_EMIT loaded(run); }, Qt::QueuedConnection);
    });
}

} // namespace parasync::ui
