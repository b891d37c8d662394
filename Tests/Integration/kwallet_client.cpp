// A KF5 client on KWallet::Wallet (libkf5wallet-dev), the library every KF5 application uses, driven by
// test_kwallet_protocol.py through kwallet_daemons.KWalletClient.
//
// It reads commands from stdin, one a line, fields separated by tabs; every string field (wallet, folder,
// key, value, pattern) is hex of its UTF-8 bytes, "~" for a null QString (maps only), "-" for an empty one.
// For each command it prints one line: the command's name, then its results, tab-separated, strings and
// bytes in the same hex form. A map or list prints its count, then its items in the library's order.
//
//   open-sync WALLET | open-async WALLET       -> opened 1|0
//   network-wallet | local-wallet              -> NAME
//   is-open                                    -> 1|0
//   has-folder F | create-folder F | remove-folder F | set-folder F -> 1|0
//   folder-list | entry-list                   -> N NAME...
//   write-password K V | write-entry K BYTES | write-map K N (KEY VALUE)...  -> RC
//   read-password K                            -> RC VALUE
//   read-entry K                               -> RC BYTES
//   read-map K                                 -> RC N (KEY VALUE)...
//   entry-type K                               -> TYPE
//   has-entry K                                -> 1|0
//   rename-entry OLD NEW | remove-entry K      -> RC
//   read-password-list PATTERN                 -> RC N (KEY VALUE)...
//   password-list | map-list                   -> OK N (KEY VALUE)...   (map-list values: hex of the QDataStream)
//   folder-does-not-exist WALLET F             -> 1|0
//   key-does-not-exist WALLET F K              -> 1|0
//   close                                      -> done (deletes the Wallet, which closes its handle)
//   open-sync-window WALLET WID                -> opened 1|0 (openWallet(WALLET, WID, Synchronous))
//   wait-closed-reopen WALLET WID              -> CLOSED OPENED, 1|0 each: whether the Wallet's walletClosed
//                                                 came within 20 s, then whether openWallet(WALLET, WID,
//                                                 Synchronous) gave an open wallet (which replaces the old)
//
// Build: g++ -fPIC -std=c++17 -I/usr/include/KF5/KWallet $(pkg-config --cflags Qt5Core Qt5DBus Qt5Gui)
//        kwallet_client.cpp -o kwallet_client -lKF5Wallet $(pkg-config --libs Qt5Core Qt5DBus Qt5Gui)

#include <KWallet>

#include <QByteArray>
#include <QCoreApplication>
#include <QDataStream>
#include <QEventLoop>
#include <QMap>
#include <QStringList>
#include <QTimer>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

using KWallet::Wallet;

static QString decode(const std::string &field)
{
    if (field == "~") {
        return QString();
    }
    if (field == "-") {
        return QString(QLatin1String(""));
    }
    return QString::fromUtf8(QByteArray::fromHex(QByteArray::fromStdString(field)));
}

static QByteArray decodeBytes(const std::string &field)
{
    return field == "-" ? QByteArray() : QByteArray::fromHex(QByteArray::fromStdString(field));
}

static std::string encode(const QString &value)
{
    if (value.isNull()) {
        return "~";
    }
    if (value.isEmpty()) {
        return "-";
    }
    return value.toUtf8().toHex().toStdString();
}

static std::string encodeBytes(const QByteArray &value)
{
    return value.isEmpty() ? "-" : value.toHex().toStdString();
}

static std::vector<std::string> split(const std::string &line)
{
    std::vector<std::string> fields;
    std::string::size_type start = 0;
    while (true) {
        const auto tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
        if (tab == std::string::npos) {
            return fields;
        }
        start = tab + 1;
    }
}

static std::string pairs(const QMap<QString, QString> &map)
{
    std::string out = std::to_string(map.size());
    for (auto it = map.constBegin(); it != map.constEnd(); ++it) {
        out += "\t" + encode(it.key()) + "\t" + encode(it.value());
    }
    return out;
}

static std::string names(const QStringList &list)
{
    std::string out = std::to_string(list.size());
    for (const QString &name : list) {
        out += "\t" + encode(name);
    }
    return out;
}

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    app.setApplicationName(QStringLiteral("kwallet-test-client"));
    std::unique_ptr<Wallet> wallet;
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) {
            continue;
        }
        const std::vector<std::string> f = split(line);
        const std::string &cmd = f[0];
        auto arg = [&](size_t i) { return i < f.size() ? decode(f[i]) : QString(); };
        std::string out;
        if (cmd == "open-sync") {
            wallet.reset(Wallet::openWallet(arg(1), 0, Wallet::Synchronous));
            out = wallet ? "1" : "0";
        } else if (cmd == "open-async") {
            wallet.reset(Wallet::openWallet(arg(1), 0, Wallet::Asynchronous));
            bool opened = false;
            if (wallet) {
                QEventLoop loop;
                QObject::connect(wallet.get(), &Wallet::walletOpened, &loop, [&](bool success) {
                    opened = success;
                    loop.quit();
                });
                QTimer::singleShot(20000, &loop, &QEventLoop::quit);
                loop.exec();
            }
            out = opened && wallet->isOpen() ? "1" : "0";
        } else if (cmd == "open-sync-window") {
            wallet.reset(Wallet::openWallet(arg(1), static_cast<WId>(f.size() > 2 ? std::stoll(f[2]) : 0),
                                            Wallet::Synchronous));
            out = wallet && wallet->isOpen() ? "1" : "0";
        } else if (cmd == "wait-closed-reopen") {
            bool closed = false;
            if (wallet) {
                QEventLoop loop;
                QObject::connect(wallet.get(), &Wallet::walletClosed, &loop, [&]() {
                    closed = true;
                    loop.quit();
                });
                QTimer::singleShot(20000, &loop, &QEventLoop::quit);
                loop.exec();
            }
            wallet.reset(Wallet::openWallet(arg(1), static_cast<WId>(f.size() > 2 ? std::stoll(f[2]) : 0),
                                            Wallet::Synchronous));
            out = std::string(closed ? "1" : "0") + "\t" + (wallet && wallet->isOpen() ? "1" : "0");
        } else if (cmd == "network-wallet") {
            out = encode(Wallet::NetworkWallet());
        } else if (cmd == "local-wallet") {
            out = encode(Wallet::LocalWallet());
        } else if (cmd == "folder-does-not-exist") {
            out = Wallet::folderDoesNotExist(arg(1), arg(2)) ? "1" : "0";
        } else if (cmd == "key-does-not-exist") {
            out = Wallet::keyDoesNotExist(arg(1), arg(2), arg(3)) ? "1" : "0";
        } else if (!wallet) {
            out = "no-wallet";
        } else if (cmd == "is-open") {
            out = wallet->isOpen() ? "1" : "0";
        } else if (cmd == "has-folder") {
            out = wallet->hasFolder(arg(1)) ? "1" : "0";
        } else if (cmd == "create-folder") {
            out = wallet->createFolder(arg(1)) ? "1" : "0";
        } else if (cmd == "remove-folder") {
            out = wallet->removeFolder(arg(1)) ? "1" : "0";
        } else if (cmd == "set-folder") {
            out = wallet->setFolder(arg(1)) ? "1" : "0";
        } else if (cmd == "folder-list") {
            out = names(wallet->folderList());
        } else if (cmd == "entry-list") {
            out = names(wallet->entryList());
        } else if (cmd == "write-password") {
            out = std::to_string(wallet->writePassword(arg(1), arg(2)));
        } else if (cmd == "read-password") {
            QString value;
            const int rc = wallet->readPassword(arg(1), value);
            out = std::to_string(rc) + "\t" + encode(value);
        } else if (cmd == "write-entry") {
            out = std::to_string(wallet->writeEntry(arg(1), decodeBytes(f.size() > 2 ? f[2] : "-")));
        } else if (cmd == "read-entry") {
            QByteArray value;
            const int rc = wallet->readEntry(arg(1), value);
            out = std::to_string(rc) + "\t" + encodeBytes(value);
        } else if (cmd == "write-map") {
            QMap<QString, QString> map;
            const size_t count = f.size() > 2 ? std::stoul(f[2]) : 0;
            for (size_t i = 0; i < count; ++i) {
                map.insert(arg(3 + 2 * i), arg(4 + 2 * i));
            }
            out = std::to_string(wallet->writeMap(arg(1), map));
        } else if (cmd == "read-map") {
            QMap<QString, QString> map;
            const int rc = wallet->readMap(arg(1), map);
            out = std::to_string(rc) + "\t" + pairs(map);
        } else if (cmd == "entry-type") {
            out = std::to_string(static_cast<int>(wallet->entryType(arg(1))));
        } else if (cmd == "has-entry") {
            out = wallet->hasEntry(arg(1)) ? "1" : "0";
        } else if (cmd == "rename-entry") {
            out = std::to_string(wallet->renameEntry(arg(1), arg(2)));
        } else if (cmd == "remove-entry") {
            out = std::to_string(wallet->removeEntry(arg(1)));
        } else if (cmd == "read-password-list") {
            QMap<QString, QString> map;
            const int rc = wallet->readPasswordList(arg(1), map);
            out = std::to_string(rc) + "\t" + pairs(map);
        } else if (cmd == "password-list") {
            bool ok = false;
            const QMap<QString, QString> map = wallet->passwordList(&ok);
            out = std::string(ok ? "1" : "0") + "\t" + pairs(map);
        } else if (cmd == "map-list") {
            bool ok = false;
            const QMap<QString, QMap<QString, QString>> maps = wallet->mapList(&ok);
            out = std::string(ok ? "1" : "0") + "\t" + std::to_string(maps.size());
            for (auto it = maps.constBegin(); it != maps.constEnd(); ++it) {
                QByteArray bytes;
                QDataStream stream(&bytes, QIODevice::WriteOnly);
                stream << it.value();
                out += "\t" + encode(it.key()) + "\t" + encodeBytes(bytes);
            }
        } else if (cmd == "close") {
            wallet.reset();
            out = "done";
        } else {
            out = "unknown-command";
        }
        std::cout << cmd << "\t" << out << std::endl;
    }
    wallet.reset();
    return 0;
}
