// What the app's process sets up before Qt starts: a private runtime folder
// where the session has none (and never one others can read), and the
// offscreen platform for runs that show no window when there is no display.
#include "ui/app_process.h"

#include <QDir>
#include <QMap>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>

#include <unistd.h>

using namespace parasync::ui;

namespace {

// Sets or unsets environment variables for one test and puts them back.
class ScopedEnvironment
{
public:
    ~ScopedEnvironment()
    {
        for (auto it = m_saved.cbegin(); it != m_saved.cend(); ++it) {
            if (it.value().isNull())
                qunsetenv(it.key().constData());
            else
                qputenv(it.key().constData(), it.value());
        }
    }
    void set(const char *name, const QByteArray &value)
    {
        save(name);
        qputenv(name, value);
    }
    void unset(const char *name)
    {
        save(name);
        qunsetenv(name);
    }

private:
    void save(const char *name)
    {
        if (!m_saved.contains(name))
            m_saved.insert(name, qEnvironmentVariableIsSet(name) ? qgetenv(name) : QByteArray());
    }
    QMap<QByteArray, QByteArray> m_saved;
};

QByteArray runtimeFolderIn(const QTemporaryDir &tmp)
{
    return QDir(tmp.path()).filePath(QStringLiteral("runtime-%1").arg(::getuid())).toLocal8Bit();
}

char **argv(std::vector<std::string> &arguments, std::vector<char *> &pointers)
{
    pointers.clear();
    for (std::string &argument : arguments)
        pointers.push_back(argument.data());
    pointers.push_back(nullptr);
    return pointers.data();
}

} // namespace

class TestAppProcess : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aSessionWithoutARuntimeFolderGetsAPrivateOne()
    {
        QTemporaryDir tmp;
        ScopedEnvironment environment;
        environment.set("TMPDIR", tmp.path().toLocal8Bit());
        environment.unset("XDG_RUNTIME_DIR");
        ensureRuntimeDirectory();
        QCOMPARE(qgetenv("XDG_RUNTIME_DIR"), runtimeFolderIn(tmp));
        struct stat info
        {
        };
        QCOMPARE(::lstat(runtimeFolderIn(tmp).constData(), &info), 0);
        QVERIFY(S_ISDIR(info.st_mode));
        QCOMPARE(info.st_mode & 0777, mode_t(0700));
        QCOMPARE(info.st_uid, ::getuid());
    }

    void aFolderOthersCanReadIsNotTaken()
    {
        QTemporaryDir tmp;
        QVERIFY(::mkdir(runtimeFolderIn(tmp).constData(), 0755) == 0);
        QVERIFY(::chmod(runtimeFolderIn(tmp).constData(), 0755) == 0); // whatever the umask
        ScopedEnvironment environment;
        environment.set("TMPDIR", tmp.path().toLocal8Bit());
        environment.unset("XDG_RUNTIME_DIR");
        ensureRuntimeDirectory();
        QVERIFY(qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR"));
    }

    void theSessionsOwnRuntimeFolderIsKept()
    {
        QTemporaryDir tmp;
        ScopedEnvironment environment;
        environment.set("TMPDIR", tmp.path().toLocal8Bit());
        environment.set("XDG_RUNTIME_DIR", "/run/user/4242");
        ensureRuntimeDirectory();
        QCOMPARE(qgetenv("XDG_RUNTIME_DIR"), QByteArray("/run/user/4242"));
        QVERIFY(QDir(tmp.path()).isEmpty());
    }

    void aRunWithoutAWindowPaintsOffscreenWhenThereIsNoDisplay_data()
    {
        QTest::addColumn<QString>("argument");
        QTest::addColumn<QByteArray>("display");
        QTest::addColumn<bool>("windowless");
        QTest::addColumn<QByteArray>("platform");
        QTest::newRow("headless") << QStringLiteral("--headless") << QByteArray() << true << QByteArray("offscreen");
        QTest::newRow("help") << QStringLiteral("--help") << QByteArray() << true << QByteArray("offscreen");
        QTest::newRow("version") << QStringLiteral("--version") << QByteArray() << true << QByteArray("offscreen");
        // A display is there: Qt picks its platform as ever.
        QTest::newRow("headless on a display")
            << QStringLiteral("--headless") << QByteArray(":0") << true << QByteArray();
        // No display for a window: offscreen all the same, so that the flags
        // are read (a bad one said as such); main then refuses the window.
        QTest::newRow("the window without a display")
            << QStringLiteral("--demo") << QByteArray() << false << QByteArray("offscreen");
        QTest::newRow("the window") << QStringLiteral("--demo") << QByteArray(":0") << false << QByteArray();
    }

    void aRunWithoutAWindowPaintsOffscreenWhenThereIsNoDisplay()
    {
        QFETCH(QString, argument);
        QFETCH(QByteArray, display);
        QFETCH(bool, windowless);
        QFETCH(QByteArray, platform);
        ScopedEnvironment environment;
        environment.unset("WAYLAND_DISPLAY");
        environment.unset("QT_QPA_PLATFORM");
        if (display.isEmpty())
            environment.unset("DISPLAY");
        else
            environment.set("DISPLAY", display);
        std::vector<std::string> arguments{"parasync", argument.toStdString()};
        std::vector<char *> pointers;
        QCOMPARE(preparePlatformForArguments(int(arguments.size()), argv(arguments, pointers)), windowless);
        QCOMPARE(qgetenv("QT_QPA_PLATFORM"), platform);
        QCOMPARE(lackedDisplay(), display.isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestAppProcess)
#include "tst_app_process.moc"
