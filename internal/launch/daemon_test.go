package launch

import "testing"

func TestRunsDaemon(t *testing.T) {
	for _, tt := range []struct {
		line string
		want bool
	}{
		// What Open MPI 4.1 sends (no --prefix, then with one, then for csh).
		{` orted -mca ess "env" -mca ess_base_jobid "431685632" -mca orte_hnp_uri "431685632.0;tcp://192.0.2.2:58335"`, true},
		{`PATH=/opt/ompi/bin:$PATH ; export PATH ; LD_LIBRARY_PATH=/opt/ompi/lib:${LD_LIBRARY_PATH:-} ; export LD_LIBRARY_PATH ;   /opt/ompi/bin/orted -mca ess "env"`, true},
		{`set path = ( /opt/ompi/bin $path ) ; if ( $?LD_LIBRARY_PATH == 1 ) set OMPI_have_llp ; /opt/ompi/bin/orted --daemonize`, true},
		// MPICH Hydra.
		{`"/usr/bin/hydra_pmi_proxy" --control-port vm:40123 --rmk user --launcher rsh --demux poll --pgid 0 --retries 10 --usize -2 --proxy-id 0`, true},
		{`exec env -i FOO=1 orted`, true},
		{`nohup /usr/local/bin/orted &`, true},
		{`cd /tmp && 'orted' -mca x y`, true},
		// Not daemons.
		{`rm -rf /`, false},
		{`echo orted`, false},
		{`ls /usr/bin/orted; cat /etc/passwd`, false},
		{`orted2 -mca`, false},
		{`'echo orted'`, false},
		{`sh -c orted`, false},
		{``, false},
	} {
		if got := runsDaemon(tt.line, DefaultDaemons); got != tt.want {
			t.Errorf("runsDaemon(%q) = %v, want %v (command words %q)", tt.line, got, tt.want, commandWords(tt.line))
		}
	}
}
