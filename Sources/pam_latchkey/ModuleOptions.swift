/// The arguments given after the module's name in a PAM stack line.
struct ModuleOptions {
    /// `auto_start`: start latchkeyd when no daemon answers.
    var autoStart = false
    /// `only_if=svc1,svc2`: act only for these PAM services.
    var onlyIf: [String]?
    /// `lock_on_close`: lock the login keychain when the user's last session closes.
    var lockOnClose = false
    /// `debug`: log each step, not only failures.
    var debug = false
    /// `daemon=PATH`: the latchkeyd executable.
    var daemonPath = "/usr/bin/latchkeyd"
    /// Arguments the module did not understand (logged, then ignored).
    var unknown: [String] = []

    init(argc: Int32, argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?) {
        guard let argv, argc > 0 else { return }
        for index in 0..<Int(argc) {
            guard let argument = argv[index].map({ String(cString: $0) }) else { continue }
            parse(argument)
        }
    }

    private mutating func parse(_ argument: String) {
        switch argument {
        case "auto_start": autoStart = true
        case "lock_on_close": lockOnClose = true
        case "debug": debug = true
        default:
            if argument.hasPrefix("only_if=") {
                onlyIf = argument.dropFirst("only_if=".count).split(separator: ",").map(String.init)
            } else if argument.hasPrefix("daemon="), argument.count > "daemon=".count {
                daemonPath = String(argument.dropFirst("daemon=".count))
            } else {
                unknown.append(argument)
            }
        }
    }

    /// Whether the module acts for `service`.
    func applies(to service: String) -> Bool {
        onlyIf.map { $0.contains(service) } ?? true
    }
}
