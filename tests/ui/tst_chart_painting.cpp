// A chart painted outside its window. Into a cell of the run report or of
// the mode comparison's figure (ChartExporter::paintScaled): laid out for a
// box larger than the cell and scaled into it, whole, on white, and nothing
// of it outside the cell. Into a file: PNG, SVG and PDF on white at the
// chart's export size, and a file that cannot be written says which.
#include "ui/charts/chart_exporter.h"

#include <QFileInfo>
#include <QImage>
#include <QPainter>
#include <QTemporaryDir>
#include <QTest>

using namespace parasync::ui;

namespace {

const QColor kBackdrop(255, 0, 255);
const QColor kFrame(255, 0, 0);
const QColor kFill(0, 0, 255);

// Paints a red frame along the edges of its target; with `overdraw`, first
// a blue square far beyond them, as a chart whose labels run over would.
class FramedChart : public ExportableChart
{
public:
    explicit FramedChart(bool overdraw) : m_overdraw(overdraw) {}
    QString exportName() const override { return QStringLiteral("framed"); }
    QString title() const override { return QStringLiteral("Framed"); }
    QSize exportSize() const override { return QSize(300, 200); }
    void renderTo(QPainter *painter, const QRectF &target) override
    {
        m_target = target;
        if (m_overdraw)
            painter->fillRect(target.adjusted(-1000, -1000, 1000, 1000), kFill);
        painter->setPen(QPen(kFrame, 4));
        painter->setBrush(Qt::NoBrush);
        painter->drawRect(target.adjusted(2, 2, -2, -2));
    }
    CsvTable csv() const override { return {}; }
    int modeMarkerCount() const override { return 0; }
    int pointCount() const override { return 0; }

    QRectF m_target;

private:
    bool m_overdraw;
};

} // namespace

class TestChartPainting : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aReportCellHoldsTheWholeChartAndNothingElse()
    {
        QImage page(600, 400, QImage::Format_ARGB32);
        page.fill(kBackdrop);
        FramedChart chart(true);
        const QRect cell(100, 80, 220, 110);
        {
            QPainter painter(&page);
            ChartExporter::paintScaled(&painter, &chart, QRectF(cell), 0.5);
        }
        // Laid out for a box twice the cell's size, so its text stays large
        // relative to its plot once scaled.
        QCOMPARE(chart.m_target.size(), QSizeF(440, 220));
        for (int y = 0; y < page.height(); ++y)
            for (int x = 0; x < page.width(); ++x)
                if (!cell.contains(x, y))
                    QVERIFY2(page.pixelColor(x, y) == kBackdrop, qPrintable(QStringLiteral("%1,%2").arg(x).arg(y)));
        // The chart's frame is the cell's: its corners reach the cell's.
        QCOMPARE(page.pixelColor(cell.topLeft() + QPoint(1, 1)), kFrame);
        QCOMPARE(page.pixelColor(cell.bottomRight() - QPoint(1, 1)), kFrame);
        QCOMPARE(page.pixelColor(cell.center()), kFill);
    }

    void aCellIsWhiteWhereTheChartDrawsNothing()
    {
        QImage page(400, 300, QImage::Format_ARGB32);
        page.fill(kBackdrop);
        FramedChart chart(false);
        {
            QPainter painter(&page);
            ChartExporter::paintScaled(&painter, &chart, QRectF(50, 50, 200, 100), 0.55);
        }
        QCOMPARE(page.pixelColor(150, 100), QColor(Qt::white));
        QCOMPARE(page.pixelColor(10, 10), kBackdrop);
    }

    void aPngIsTheChartOnWhiteAtItsExportSize()
    {
        QTemporaryDir dir;
        FramedChart chart(false);
        QString error;
        const QString path = dir.filePath(QStringLiteral("framed.png"));
        QVERIFY2(ChartExporter::exportPng(&chart, path, &error), qPrintable(error));
        const QImage image(path);
        QCOMPARE(image.size(), chart.exportSize());
        QCOMPARE(chart.m_target, QRectF(QPointF(0, 0), QSizeF(chart.exportSize())));
        QCOMPARE(image.pixelColor(1, 1), kFrame);
        // Opaque white inside the frame, not transparent: viewers show a
        // transparent PNG on their own background.
        for (int y = 6; y < image.height() - 6; ++y)
            for (int x = 6; x < image.width() - 6; ++x)
                QVERIFY2(image.pixelColor(x, y) == QColor(Qt::white),
                         qPrintable(QStringLiteral("%1,%2").arg(x).arg(y)));
    }

    void aFileThatCannotBeWrittenSaysWhich_data()
    {
        QTest::addColumn<QString>("format");
        QTest::newRow("svg") << QStringLiteral("svg");
        QTest::newRow("pdf") << QStringLiteral("pdf");
        QTest::newRow("png") << QStringLiteral("png");
    }

    void aFileThatCannotBeWrittenSaysWhich()
    {
        QFETCH(QString, format);
        FramedChart chart(false);
        const QString path = QStringLiteral("/proc/parasync-cannot-be-here/framed.") + format;
        QString error;
        const bool written = format == QStringLiteral("svg")   ? ChartExporter::exportSvg(&chart, path, &error)
                             : format == QStringLiteral("pdf") ? ChartExporter::exportPdf(&chart, path, &error)
                                                               : ChartExporter::exportPng(&chart, path, &error);
        QVERIFY(!written);
        QVERIFY2(error.contains(path), qPrintable(error));
    }

    void aVectorFileIsWrittenWithTheChart_data()
    {
        QTest::addColumn<QString>("format");
        QTest::newRow("svg") << QStringLiteral("svg");
        QTest::newRow("pdf") << QStringLiteral("pdf");
    }

    void aVectorFileIsWrittenWithTheChart()
    {
        QFETCH(QString, format);
        QTemporaryDir dir;
        FramedChart chart(false);
        const QString path = dir.filePath(QStringLiteral("framed.") + format);
        QString error;
        const bool written = format == QStringLiteral("svg") ? ChartExporter::exportSvg(&chart, path, &error)
                                                             : ChartExporter::exportPdf(&chart, path, &error);
        QVERIFY2(written, qPrintable(error));
        QVERIFY(QFileInfo(path).size() > 0);
        // Painted at the export size, whatever the device's resolution.
        QCOMPARE(chart.m_target, QRectF(QPointF(0, 0), QSizeF(chart.exportSize())));
    }
};

QTEST_MAIN(TestChartPainting)
#include "tst_chart_painting.moc"
