#include "ui/dialogs/preflight_dialog.h"

#include "orchestration/preflight_check.h"

#include <QBrush>
#include <QDialogButtonBox>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace parasync::ui {

namespace {

constexpr PreflightItem::Kind kColumns[]
    = {PreflightItem::Kind::Ssh, PreflightItem::Kind::Node, PreflightItem::Kind::Port, PreflightItem::Kind::Reach,
       PreflightItem::Kind::Program};

QColor outcomeColor(CheckOutcome outcome)
{
    switch (outcome) {
    case CheckOutcome::Passed: return QColor(0xd4, 0xed, 0xda);
    case CheckOutcome::Failed: return QColor(0xf8, 0xd7, 0xda);
    case CheckOutcome::Skipped: return QColor(0xe9, 0xec, 0xef);
    case CheckOutcome::Pending: return QColor(0xff, 0xf3, 0xcd);
    }
    return {};
}

} // namespace

PreflightDialog::PreflightDialog(const ClusterPlan &plan, const QString &nodeBinary, QWidget *parent)
    : QDialog(parent)
    , m_plan(plan)
    , m_check(new PreflightCheck(this))
{
    m_check->setNodeBinary(nodeBinary);
    setUp();
    m_check->start(m_plan);
}

PreflightDialog::PreflightDialog(PreflightCheck *check, const ClusterPlan &plan, QWidget *parent)
    : QDialog(parent)
    , m_plan(plan)
    , m_check(check)
{
    setUp();
    refresh();
    // Its owner may have started it a while ago: it may be over already.
    if (!m_check->isRunning() && !m_check->items().empty())
        onFinished(m_check->passed());
}

void PreflightDialog::setUp()
{
    setObjectName(QStringLiteral("preflightDialog"));
    setWindowTitle(tr("Pre-flight check"));

    m_summary = new QLabel(this);
    m_summary->setWordWrap(true);
    m_grid = new QTableWidget(this);
    m_grid->setObjectName(QStringLiteral("preflightGrid"));
    m_grid->setColumnCount(int(std::size(kColumns)));
    QStringList headers;
    for (const auto kind : kColumns)
        headers << checkKindName(kind);
    m_grid->setHorizontalHeaderLabels(headers);
    m_grid->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_grid->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_grid->setSelectionMode(QAbstractItemView::NoSelection);
    m_grid->setWordWrap(true);
    m_grid->setFocusPolicy(Qt::NoFocus);
    m_problems = new QTextBrowser(this);
    m_problems->setObjectName(QStringLiteral("preflightProblems"));

    auto *buttons = new QDialogButtonBox(this);
    m_again = buttons->addButton(tr("Check again"), QDialogButtonBox::ActionRole);
    m_freePorts = buttons->addButton(tr("Use free ports"), QDialogButtonBox::ActionRole);
    m_freePorts->setObjectName(QStringLiteral("useFreePorts"));
    m_launch = buttons->addButton(tr("Launch"), QDialogButtonBox::AcceptRole);
    m_launch->setObjectName(QStringLiteral("launch"));
    buttons->addButton(QDialogButtonBox::Cancel);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_again, &QPushButton::clicked, this, [this] { m_check->start(m_plan); });
    connect(m_freePorts, &QPushButton::clicked, this, &PreflightDialog::useFreePorts);

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_summary);
    layout->addWidget(m_grid, 3);
    layout->addWidget(new QLabel(tr("Problems and what to try:"), this));
    layout->addWidget(m_problems, 2);
    layout->addWidget(buttons);
    resize(980, 560);

    connect(m_check, &PreflightCheck::itemsChanged, this, &PreflightDialog::refresh);
    connect(m_check, &PreflightCheck::finished, this, &PreflightDialog::onFinished);
}

PreflightDialog::~PreflightDialog() = default;

void PreflightDialog::refresh()
{
    const QStringList &hosts = m_check->hosts();
    m_grid->setRowCount(int(hosts.size()));
    m_grid->setVerticalHeaderLabels(hosts);
    QString problems;
    for (int row = 0; row < int(hosts.size()); ++row) {
        for (int column = 0; column < int(std::size(kColumns)); ++column) {
            // A cell sums up its checks: failed if any failed, pending if any is.
            CheckOutcome outcome = CheckOutcome::Skipped;
            QStringList lines;
            QString shortText;
            int passed = 0;
            int total = 0;
            for (const PreflightItem &entry : m_check->items()) {
                if (entry.host != hosts[row] || entry.kind != kColumns[column])
                    continue;
                ++total;
                lines << entry.subject + QStringLiteral(": ")
                             + (entry.detail.isEmpty() ? tr("checking\u2026") : entry.detail);
                if (entry.outcome == CheckOutcome::Failed) {
                    outcome = CheckOutcome::Failed;
                    if (shortText.isEmpty())
                        shortText = QStringLiteral("\u2717 ") + entry.detail;
                } else if (entry.outcome == CheckOutcome::Pending && outcome != CheckOutcome::Failed) {
                    outcome = CheckOutcome::Pending;
                } else if (entry.outcome == CheckOutcome::Passed) {
                    ++passed;
                    if (outcome == CheckOutcome::Skipped)
                        outcome = CheckOutcome::Passed;
                }
            }
            if (outcome == CheckOutcome::Pending)
                shortText = tr("checking\u2026");
            else if (outcome == CheckOutcome::Passed)
                shortText = passed == 1 ? QStringLiteral("\u2713 ") + lines.front().section(QStringLiteral(": "), 1)
                                        : tr("\u2713 %1 of %2").arg(passed).arg(total);
            else if (outcome == CheckOutcome::Skipped)
                shortText = total == 0 ? QStringLiteral("\u2013") : tr("skipped");
            auto *cell = new QTableWidgetItem(shortText);
            cell->setToolTip(lines.join(QLatin1Char('\n')));
            cell->setBackground(QBrush(outcomeColor(total == 0 ? CheckOutcome::Skipped : outcome)));
            cell->setForeground(QBrush(Qt::black));
            m_grid->setItem(row, column, cell);
        }
    }
    for (const PreflightItem &entry : m_check->items())
        if (entry.outcome == CheckOutcome::Failed)
            problems += QStringLiteral("<p><b>%1 \u00b7 %2 \u00b7 %3</b>: %4<br/>\u2192 <i>%5</i></p>")
                            .arg(entry.host.toHtmlEscaped(), checkKindName(entry.kind), entry.subject.toHtmlEscaped(),
                                 entry.detail.toHtmlEscaped(), entry.fix.toHtmlEscaped());
    m_grid->resizeRowsToContents();
    m_problems->setHtml(problems.isEmpty() ? (m_check->isRunning() ? tr("<p>Checking\u2026</p>") : tr("<p>None.</p>"))
                                           : problems);
    m_again->setEnabled(!m_check->isRunning());
    m_freePorts->setEnabled(!m_check->isRunning() && m_check->hasPortSuggestions());
    m_launch->setEnabled(!m_check->isRunning());
    if (m_check->isRunning())
        m_summary->setText(tr("Checking %1 host(s) over ssh: login, parasync-node and its version, each task's port, "
                              "and whether every worker host reaches every ps\u2026")
                               .arg(hosts.size()));
}

void PreflightDialog::onFinished(bool passed)
{
    refresh();
    m_launch->setText(passed ? tr("Launch") : tr("Launch anyway"));
    m_summary->setText(passed ? tr("Every check passed: the cluster can start.")
                              : tr("Some checks failed: each says what to try below. Hover over a cell for details."));
    if (passed)
        m_launch->setDefault(true);
}

void PreflightDialog::useFreePorts()
{
    m_plan = m_check->planWithFreePorts();
    m_portsRewritten = true;
    m_check->start(m_plan);
}

} // namespace parasync::ui
