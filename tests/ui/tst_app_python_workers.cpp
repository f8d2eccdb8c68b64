// `parasync --headless` on the README's cluster file whose workers are Python
// (python/examples/torch-workers.json, on free ports): ps:0 runs
// as parasync-node with the training flags, the two workers as the file's
// "worker_command" (python/examples/torch_digits_mlp.py) with the cluster
// flags the app adds, and the Python package found in this build tree
// without any PYTHONPATH given. The run ends when ps:0 says it finished, and
// the exported loss chart holds both workers' batch losses. A worker command
// whose program is not there is refused before anything starts, saying what
// to fix.
#include "base/port_holder.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;

namespace {

QString freeAddress()
{
    return u"127.0.0.1:%1"_s.arg(parasync::pickFreePort());
}

void writeText(const QString &path, const QString &text)
{
    QFile file(path);
    QVERIFY2(file.open(QIODevice::WriteOnly), qPrintable(path));
    file.write(text.toUtf8());
}

// The app as a user runs it, without a PYTHONPATH: the launcher finds this
// build's package itself.
QProcessEnvironment environmentWithoutPythonPath()
{
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.remove(u"PYTHONPATH"_s);
    return environment;
}

// The README's example (python/examples/torch-workers.json) on free ports,
// its script's path made absolute and its program replaced by `program`.
QString clusterFile(const QString &program)
{
    QFile example(QStringLiteral(PARASYNC_SOURCE_DIR "/python/examples/torch-workers.json"));
    if (!example.open(QIODevice::ReadOnly))
        return {};
    QJsonObject root = QJsonDocument::fromJson(example.readAll()).object();
    root[u"cluster"_s]
        = QJsonObject{{u"ps"_s, QJsonArray{freeAddress()}}, {u"worker"_s, QJsonArray{freeAddress(), freeAddress()}}};
    QJsonArray command = root.value(u"worker_command"_s).toArray();
    if (command.size() < 2)
        return {};
    command[0] = program;
    command[1] = QString(QStringLiteral(PARASYNC_SOURCE_DIR "/") + command[1].toString());
    root[u"worker_command"_s] = command;
    return QString::fromUtf8(QJsonDocument(root).toJson());
}

} // namespace

class TestAppPythonWorkers : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QProcess probe;
        probe.start(u"/usr/bin/python3"_s, {u"-c"_s, u"import torch, sklearn, grpc"_s});
        if (!probe.waitForFinished(60000) || probe.exitCode() != 0)
            QSKIP("needs Debian's python3-torch, python3-sklearn and python3-grpcio (scripts/setup.sh installs them)");
        QVERIFY(m_dir.isValid());
    }

    void headlessRunOfPythonWorkersFinishesAndExportsBothWorkersLoss()
    {
        const QString file = m_dir.filePath(u"python-workers.json"_s);
        const QString text = clusterFile(u"/usr/bin/python3"_s);
        QVERIFY2(text.contains(u"torch_digits_mlp.py"_s), qPrintable(text));
        writeText(file, text);
        const QString exportDir = m_dir.filePath(u"export"_s);
        QProcess app;
        app.setProcessChannelMode(QProcess::MergedChannels);
        app.setProcessEnvironment(environmentWithoutPythonPath());
        app.start(QStringLiteral(PARASYNC_APP),
                  {u"--headless"_s, u"--cluster_file="_s + file, u"--optimizer=adam"_s, u"--learning_rate=0.005"_s,
                   u"--last_step=1500"_s, u"--export="_s + exportDir, u"--timeout=240"_s});
        QVERIFY(app.waitForFinished(280000));
        const QString output = QString::fromLocal8Bit(app.readAll());
        QVERIFY2(app.exitStatus() == QProcess::NormalExit && app.exitCode() == 0, qPrintable(output));
        // The app followed both workers from start to end, by their state lines.
        for (int worker : {0, 1})
            for (const char *state : {"training", "finished"}) {
                const QRegularExpression line(
                    u"worker:%1 on \\S+ \\(pid \\d+\\): %2"_s.arg(worker).arg(QLatin1String(state)));
                QVERIFY2(output.contains(line), qPrintable(u"no '%1' in:\n%2"_s.arg(line.pattern(), output)));
            }
        QVERIFY2(output.contains(u"ps:0 reports the cluster finished"_s), qPrintable(output));
        // What trained is the MLP the Python chief declared, not parasync-node's
        // linear model (whose metrics.csv has its w and b).
        const QRegularExpressionMatch runDirectory = QRegularExpression(u"run directory (\\S+)"_s).match(output);
        QVERIFY2(runDirectory.hasMatch(), qPrintable(output));
        QFile metrics(QDir(runDirectory.captured(1)).filePath(u"metrics.csv"_s));
        QVERIFY2(metrics.open(QIODevice::ReadOnly), qPrintable(metrics.fileName()));
        const QStringList columns = QString::fromUtf8(metrics.readLine()).trimmed().split(u',');
        QVERIFY2(columns.contains(u"loss"_s) && !columns.contains(u"w"_s), qPrintable(columns.join(u',')));
        // The app gave the Python chief the run directory: its final checkpoint is there.
        QVERIFY2(QFile::exists(QDir(runDirectory.captured(1)).filePath(u"model.ckpt-1500.pckpt"_s)),
                 qPrintable(QDir(runDirectory.captured(1)).entryList().join(u", "_s)));

        for (const QString &name : {u"loss.png"_s, u"loss.csv"_s, u"loss.svg"_s})
            QVERIFY2(QFile::exists(QDir(exportDir).filePath(name)), qPrintable(name));
        QFile csv(QDir(exportDir).filePath(u"loss.csv"_s));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        QSet<QString> series;
        int rows = 0;
        const QList<QByteArray> lines = csv.readAll().split('\n');
        for (qsizetype i = 1; i < lines.size(); ++i) {
            const QString line = QString::fromUtf8(lines[i]);
            if (line.isEmpty())
                continue;
            series.insert(line.section(u',', 0, 0));
            ++rows;
        }
        // Both workers' losses, and the held-out score the Python chief reported.
        QVERIFY2(series.contains(u"worker:0 batch loss"_s) && series.contains(u"worker:1 batch loss"_s)
                     && series.contains(u"held-out loss"_s) && series.contains(u"held-out accuracy"_s),
                 qPrintable(QStringList(series.begin(), series.end()).join(u", "_s)));
        QVERIFY(rows >= 20);
        // An MLP has no w and b: the parameters tab exports how its tensors moved.
        QVERIFY(!QFile::exists(QDir(exportDir).filePath(u"parameters.png"_s)));
        QFile norms(QDir(exportDir).filePath(u"variable_norms.csv"_s));
        QVERIFY(norms.open(QIODevice::ReadOnly));
        const QString normRows = QString::fromUtf8(norms.readAll());
        QVERIFY2(normRows.contains(u"\n0.weight,"_s) && normRows.contains(u"\n2.bias,"_s), qPrintable(normRows));
    }

    void aWorkerProgramThatIsNotThereIsRefusedBeforeTheLaunch()
    {
        const QString file = m_dir.filePath(u"missing-program.json"_s);
        writeText(file, clusterFile(u"/usr/bin/python3-not-here"_s));
        QProcess app;
        app.setProcessChannelMode(QProcess::MergedChannels);
        app.start(QStringLiteral(PARASYNC_APP), {u"--headless"_s, u"--cluster_file="_s + file, u"--last_step=10"_s,
                                                 u"--export="_s + m_dir.filePath(u"never"_s)});
        QVERIFY(app.waitForFinished(60000));
        const QString output = QString::fromLocal8Bit(app.readAll());
        QVERIFY2(app.exitCode() != 0, qPrintable(output));
        for (const QString &said :
             {u"worker:"_s, u"/usr/bin/python3-not-here is not there to run"_s, u"first word of \"worker_command\""_s})
            QVERIFY2(output.contains(said), qPrintable(u"no '%1' in:\n%2"_s.arg(said, output)));
        QVERIFY(!output.contains(u"ps:0 | "_s));
    }

private:
    QTemporaryDir m_dir;
};

QTEST_GUILESS_MAIN(TestAppPythonWorkers)
#include "tst_app_python_workers.moc"
