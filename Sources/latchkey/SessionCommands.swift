import ArgumentParser
import FoundationEssentials
import KeychainClient
import KeychainCore
import Pinentry

struct UpdateEnvironment: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Tell latchkeyd where this desktop session shows prompts (its display, language and pinentry).",
        discussion: """
            latchkeyd started at login runs before the desktop: until the session hands it its DISPLAY or \
            WAYLAND_DISPLAY, no prompt can show and every request that needs one is denied. The desktop runs this at \
            start (the package's autostart entry); run it by hand after changing PINENTRY. Without arguments every \
            session variable is sent from this command's environment, and those unset here are removed. NAME takes its \
            value from this environment; NAME=VALUE is sent as given; NAME= removes it. Names: \
            \(SessionEnvironment.names.sorted().joined(separator: ", ")).

            Examples:
              latchkey update-environment
              latchkey update-environment DISPLAY=:1 PINENTRY=pinentry-qt
            """)

    @Argument(help: ArgumentHelp("Variables to send; all of them if none.", valueName: "NAME[=VALUE]"))
    var variables: [String] = []

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        var changes: [String: String] = [:]
        if variables.isEmpty {
            for name in SessionEnvironment.names { changes[name] = environment[name] ?? "" }
        }
        for variable in variables {
            if let equals = variable.firstIndex(of: "=") {
                changes[String(variable[..<equals])] = String(variable[variable.index(after: equals)...])
            } else {
                changes[variable] = environment[variable] ?? ""
            }
        }
        try reportingFailures { () throws(KeychainError) in try DaemonKeychain.updateEnvironment(changes) }
    }
}
