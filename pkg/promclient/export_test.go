package promclient

// WaitFor is waitFor for the black-box tests (package promclient_test).
var WaitFor = waitFor
