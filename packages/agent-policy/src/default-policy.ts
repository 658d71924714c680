/**
 * The built-in default policy: the spec's table of defaults for initdata's `policy.rego`. Every request
 * is allowed except SetPolicy (the policy cannot be replaced from the host), WriteStream (no stdin) and
 * ExecProcess (no exec). Logs stay readable (ReadStreamRequest is true).
 *
 * Requests the table does not name (AddSwapPath, GetDiagnosticData, GetIPTables, SetIPTables, MemAgent*,
 * VolumeStats, ResizeVolume) are undefined, which the agent treats as an internal error.
 */
export const DEFAULT_POLICY_REGO = `package agent_policy

default AddARPNeighborsRequest := true
default AddSwapRequest := true
default CloseStdinRequest := true
default CopyFileRequest := true
default CreateContainerRequest := true
default CreateSandboxRequest := true
default DestroySandboxRequest := true
default GetMetricsRequest := true
default GetOOMEventRequest := true
default GuestDetailsRequest := true
default ListInterfacesRequest := true
default ListRoutesRequest := true
default MemHotplugByProbeRequest := true
default OnlineCPUMemRequest := true
default PauseContainerRequest := true
default PullImageRequest := true
default ReadStreamRequest := true
default RemoveContainerRequest := true
default RemoveStaleVirtiofsShareMountsRequest := true
default ReseedRandomDevRequest := true
default ResumeContainerRequest := true
default SetGuestDateTimeRequest := true
default SignalProcessRequest := true
default StartContainerRequest := true
default StartTracingRequest := true
default StatsContainerRequest := true
default StopTracingRequest := true
default TtyWinResizeRequest := true
default UpdateContainerRequest := true
default UpdateEphemeralMountsRequest := true
default UpdateInterfaceRequest := true
default UpdateRoutesRequest := true
default WaitProcessRequest := true

default ExecProcessRequest := false
default SetPolicyRequest := false
default WriteStreamRequest := false
`;
