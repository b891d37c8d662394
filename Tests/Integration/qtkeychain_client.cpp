// A QtKeychain (Qt5, Debian 12: libqt5keychain1 0.13.2) client for test_kwallet_clients.py. It runs one job
// per step given on the command line and prints one line per step:
//
//   write-text SERVICE KEY HEX      WritePasswordJob::setTextData(the UTF-8 of HEX)   -> "ok" | "error N MESSAGE"
//   write-binary SERVICE KEY HEX    WritePasswordJob::setBinaryData(HEX's bytes)      -> "ok" | "error N MESSAGE"
//   read SERVICE KEY                ReadPasswordJob  -> "data HEX" (binaryData()) | "error N MESSAGE"
//   delete SERVICE KEY              DeletePasswordJob -> "ok" | "error N MESSAGE"
//
// Values travel as hex so that NUL bytes survive argv and stdout; they are test data, not secrets. With
// XDG_CURRENT_DESKTOP=KDE and KDE_SESSION_VERSION=5, QtKeychain 0.13.2 (keychain_unix.cpp) asks
// org.kde.kwalletd5 networkWallet with a 500 ms timeout and, when it answers, uses its KWallet backend: folder
// = the job's service, key = the job's key, appid = the service; text is written with writePassword (a
// Password entry), binary data with writeEntry (a Stream), and read back after entryType with readPassword
// or readEntry. Which type an entry got is checked by the test over D-Bus, not here.
#include <QCoreApplication>
#include <QEventLoop>
#include <QTextStream>
#include <qt5keychain/keychain.h>

#include <cstdio>

static int runJob(QKeychain::Job *job) {
    QEventLoop loop;
    QObject::connect(job, &QKeychain::Job::finished, &loop, &QEventLoop::quit);
    job->setAutoDelete(false);
    job->start();
    loop.exec();
    return job->error();
}

static void printError(QKeychain::Job *job) {
    std::printf("error %d %s\n", int(job->error()), job->errorString().toUtf8().constData());
}

int main(int argc, char **argv) {
    QCoreApplication app(argc, argv);
    const QStringList args = app.arguments();
    for (int i = 1; i < args.size();) {
        const QString step = args.at(i);
        if ((step == "write-text" || step == "write-binary") && i + 3 < args.size()) {
            QKeychain::WritePasswordJob job(args.at(i + 1));
            job.setKey(args.at(i + 2));
            const QByteArray value = QByteArray::fromHex(args.at(i + 3).toLatin1());
            if (step == "write-text")
                job.setTextData(QString::fromUtf8(value));
            else
                job.setBinaryData(value);
            if (runJob(&job) == QKeychain::NoError)
                std::printf("ok\n");
            else
                printError(&job);
            i += 4;
        } else if (step == "read" && i + 2 < args.size()) {
            QKeychain::ReadPasswordJob job(args.at(i + 1));
            job.setKey(args.at(i + 2));
            if (runJob(&job) == QKeychain::NoError)
                std::printf("data %s\n", job.binaryData().toHex().constData());
            else
                printError(&job);
            i += 3;
        } else if (step == "delete" && i + 2 < args.size()) {
            QKeychain::DeletePasswordJob job(args.at(i + 1));
            job.setKey(args.at(i + 2));
            if (runJob(&job) == QKeychain::NoError)
                std::printf("ok\n");
            else
                printError(&job);
            i += 3;
        } else {
            std::fprintf(stderr, "usage: %s (write-text S K HEX | write-binary S K HEX | read S K | delete S K)...\n",
                         qPrintable(args.at(0)));
            return 2;
        }
        std::fflush(stdout);
    }
    return 0;
}
