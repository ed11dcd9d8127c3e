! shoal_f08.f90 - shoal_init for programs that use mpi_f08: use shoal_f08 instead of
! use shoal. Everything else is module shoal's, re-exported.
module shoal_f08
    use mpi_f08, only: MPI_Comm
    use shoal
    implicit none

    interface shoal_init
        module procedure shoal_init_f08
    end interface shoal_init

contains

    subroutine shoal_init_f08(comm, ierr)
        type(MPI_Comm), intent(in) :: comm
        integer, intent(out), optional :: ierr
        call shoal_init(comm%MPI_VAL, ierr)
    end subroutine shoal_init_f08

end module shoal_f08
